"""The local dry run: the user's own spec, on a stand-in model, on this CPU, for free.

`dry_run_spec()` turns a spec into its dry run: the same model name (so the real tokenizer
and chat template are used), data, template, filters, holdout split, reward, algorithm and
LoRA, with `model.stand_in` set and the sizes cut to what two CPU cores run in about a
minute. Every cut is stated. The trainer then runs the proof step and the smoke steps, stops
and saves a checkpoint, resumes from it for the last step, and samples a couple of held-out
prompts through evaluate's generation path (`DryRun` below). The result says what that
proved and what it cannot prove.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from posttrain.algorithms.kinds import algorithm_of, titles

# CPU sizes: the 151k-wide logits dominate a step of the 10M-parameter stand-in, so a GRPO
# step costs ~1 s per completion on 2 cores (bench/smoke.py): 2 prompts x 2 generations of
# 32 tokens keep the proof step and 4 steps within a minute and still exercise grouping.
# An SFT row is the whole chat (a tool chat with its schemas: ~1,000 tokens), so its logits
# are 150M floats: 2 rows a step (still a padded batch of rows of different lengths) halve
# the logits a step. tests/test_tool_sft_flow.py's dry run took 108 s with 4 rows (serial
# suite) and 61 s with 2 beside another trainer: two runs, not measured side by side.
MAX_COMPLETIONS = 4
MAX_GENERATIONS = 2
MAX_COMPLETION_TOKENS = 32
MAX_SFT_ROWS = 2
MAX_PROMPT_TOKENS = 1024
WARMSTART_STEPS = 2
EVAL_PROMPTS = 2
RESUME_STEPS = 1  # steps trained after the resume

PROVES = [
    "your data file, columns, filters and holdout split load, and every prompt renders "
    "through the model's real chat template and fits max_prompt_length in real tokens",
    "your reward loads and scores real completions of the real tokenizer, without error",
    f"the algorithm ({titles().replace(' and ', ' or ')}, LoRA as given, warm-start if any) runs "
    "its proof step and "
    "the smoke steps on the family's architecture",
    "a checkpoint saves and a fresh trainer resumes from it",
    "evaluate's generation path samples held-out prompts from the base and the trained arm",
]
CANNOT_PROVE = [
    "learning: the stand-in has random weights, so its rewards, losses and traces are noise "
    "and say nothing about whether this spec will improve the real model",
    "GPU speed, memory and cost: measure those with a modal smoke run (`smoke_run` with "
    "backend modal), approved like any spend",
    "the real model's own behaviour (how it uses the thinking block, when it stops)",
]


def dry_run_spec(spec_json: dict[str, Any], proof_and_steps: int) -> tuple[dict, dict]:
    """The dry run of a spec (as JSON), and the cuts made: {field: 'from -> to (why)'}."""
    data = {**spec_json, "model": {**spec_json["model"], "stand_in": True}}
    a = dict(data["algorithm"])
    cuts: dict[str, str] = {}

    def cut(name: str, value: Any, why: str, owner: dict[str, Any] = a, label: str = "") -> None:
        if owner.get(name) != value:
            cuts[label or f"algorithm.{name}"] = f"{owner.get(name)} -> {value} ({why})"
            owner[name] = value

    cpu = "CPU size"
    if algorithm_of(a["kind"]).rewarded:  # whole groups of generations a prompt
        generations = min(a["num_generations"], MAX_GENERATIONS)
        per_step = min(a["batch_size"] // a["num_generations"], MAX_COMPLETIONS // generations)
        prompts = max(1, per_step)
        cut("num_generations", generations, cpu)
        cut("batch_size", prompts * generations, cpu)
    else:
        cut("batch_size", min(a["batch_size"], MAX_SFT_ROWS), cpu)
    cut("max_completion_length", min(a["max_completion_length"], MAX_COMPLETION_TOKENS), cpu)
    cut("max_prompt_length", min(a["max_prompt_length"], MAX_PROMPT_TOKENS), cpu)
    # A cut only lowers: a spec of fewer steps keeps them, down to the two a checkpoint and a
    # resume need (the one raise, said as one)
    planned = proof_and_steps + RESUME_STEPS
    steps = max(1 + RESUME_STEPS, min(a["steps"], planned))
    if steps > a["steps"]:
        cut("steps", steps, f"raised: a checkpoint, then a resume for {RESUME_STEPS}")
    else:
        cut(
            "steps",
            steps,
            f"proof step, {steps - 1 - RESUME_STEPS} steps, resume for {RESUME_STEPS}",
        )
    cut("save_every", 0, "one checkpoint, before the resume")
    traces = {"every": 1, "steps": [], "samples": min(a["traces"]["samples"] or 4, 8)}
    cut("traces", traces, "a trace every step")
    if a.get("eval_every"):  # the held-out curve's path runs too: before step 1, then every 2
        cut("eval_every", min(a["eval_every"], 2), "a held-out point every 2 steps")
        cut("eval_tasks", min(a["eval_tasks"], EVAL_PROMPTS), cpu)
    if a.get("warmstart"):
        ws = dict(a["warmstart"])
        for name, limit in (("steps", WARMSTART_STEPS), ("batch_size", MAX_SFT_ROWS)):
            cut(name, min(ws[name], limit), cpu, ws, f"algorithm.warmstart.{name}")
        a["warmstart"] = ws
    data["algorithm"] = a
    compute = dict(data["compute"])
    cut("backend", "local", "a dry run runs here, free", compute, "compute.backend")
    data["compute"] = compute
    return data, cuts


def stop_after(step: int) -> Any:
    """A trainer callback that stops (and saves a checkpoint) after `step`, as an
    interrupted run would: the resume then continues the same schedule."""
    from transformers import TrainerCallback

    class StopAfter(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= step:
                control.should_save = True
                control.should_training_stop = True
            return control

    return StopAfter()


@dataclass
class DryRun:
    """What the dry run saw, gathered as it goes and reported at the end."""

    stand_in: str
    tokenizer: str
    proved: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    also_cannot: list[str] = field(default_factory=list)  # what this spec's dry run adds
    judge: dict[str, Any] | None = None  # a judge reward's requests, cache hits, ungraded

    def saw(self, fact: str) -> None:
        self.proved.append(fact)

    def report(self) -> dict[str, Any]:
        facts = asdict(self)
        return {
            **{k: v for k, v in facts.items() if k != "also_cannot"},
            "cannot_prove": CANNOT_PROVE + self.also_cannot,
            "seconds": round(time.time() - self.started_at, 1),
        }


def evaluation_pass(
    run_dir: Path, rows: list[dict[str, Any]], reward: Any, spec: Any, reporter: Any, step: int
) -> None:
    """Evaluate's generation path on a few held-out rows: the base arm, then the trained arm
    (the adapter attached), each sampled once and scored; kept as traces of the phases
    `eval_base` and `eval_trained`."""
    from posttrain.data.toolcalls import as_text
    from posttrain.gpu.arms import generate_job
    from posttrain.rewards.guards import score_rows

    job = {
        "prompts": [r["prompt"] for r in rows],
        "tools": [r.get("tools") for r in rows],
        "k": 1,
        "base_seeds": [spec.algorithm.seed],
        "trained_seed": spec.algorithm.seed,
        "max_new_tokens": spec.algorithm.max_completion_length,
        "temperature": spec.algorithm.temperature,
        "template_kwargs": spec.model.template_kwargs(),
    }
    if spec.environment is not None:  # whole held-out episodes, scored where they played
        job["rows"] = rows
    out = generate_job(run_dir.parent, run_dir.name, job)
    for arm, completions in (("base", out["base"][0]), ("trained", out["trained"])):
        if spec.environment is not None:
            played = episode_traces(rows, [c[0] for c in completions], step)
            reporter.trace(step, played, phase=f"eval_{arm}")
            continue
        texts = [c[0] for c in completions]
        scores = score_rows(reward, texts, rows) if reward is not None else None
        traces = [
            {
                "step": step,
                "idx": i,
                "group": i,
                "prompt": r["prompt_text"],
                "completion": texts[i],
                "reward": scores.rewards[i] if scores else None,
                "components": scores.row(i) if scores else {},
                "reference": as_text(r.get("reference")),
            }
            for i, r in enumerate(rows)
        ]
        reporter.trace(step, traces, phase=f"eval_{arm}")


def train_with_resume(job: Any, dry: DryRun) -> Any:
    """Train to the last step but one, stop with a checkpoint as an interrupted run would,
    then resume from it in a fresh trainer for the last step."""
    from posttrain.gpu.phases import train_phase

    a = job.spec.algorithm
    first = a.steps - RESUME_STEPS
    trainer = train_phase(job, extra_callbacks=(stop_after(first),))
    checkpoint = job.out / f"checkpoint-{first}"
    if trainer.state.global_step != first or not checkpoint.is_dir():
        raise RuntimeError(
            f"the dry run stopped at step {trainer.state.global_step} and saved "
            f"{'no' if not checkpoint.is_dir() else 'a'} checkpoint-{first}: checkpointing "
            f"does not work for this spec"
        )
    lora = f"LoRA r{a.lora.r} on {a.lora.target_modules}" if a.lora else "full fine-tune"
    algorithm = algorithm_of(a)
    scored = algorithm.dry_proves
    if algorithm.step.reference == "always":
        scored += (
            ", its reference the base with the adapter off"
            if a.lora
            else ", against a reference copy of the base"
        )
    dry.saw(
        f"{a.kind.upper()} ({lora}) on the stand-in: the proof step and steps 2-{first} "
        f"trained; {scored}; checkpoint-{first} saved"
    )
    job.reporter.check_cancel()
    job.reporter.stage("resume_check")
    trainer = train_phase(job, resume=str(checkpoint), proof=False)
    dry.saw(
        f"a fresh trainer resumed from checkpoint-{first} and trained to step "
        f"{trainer.state.global_step}"
    )
    return trainer


RANDOM_MODEL_TOOLS = (
    "multi-turn learning: a random-weight stand-in rarely writes a well-formed <tool_call>, so "
    "its training episodes mostly end at the first turn and rarely reach your tools; the "
    "scripted episode (traces of phase `scripted`) is what proves the tools, their bounds, the "
    "reward and the chat template"
)


def episode_traces(
    rows: list[dict[str, Any]], records: list[dict[str, Any]], step: int
) -> list[dict[str, Any]]:
    """Traces of played episodes (posttrain.gpu.episodes), one per row."""
    from posttrain.data.toolcalls import as_text
    from posttrain.environments.transcript import episode_line

    return [
        {
            "step": step,
            "idx": i,
            "group": i,
            "prompt": r["prompt_text"],
            "completion": episode_line(rec["episode"]),
            "episode": rec["episode"],
            "reward": rec["reward"],
            "components": rec["components"],
            "reference": as_text(r.get("reference")),
        }
        for i, (r, rec) in enumerate(zip(rows, records, strict=True))
    ]


def scripted_episode(
    spec: Any, rows: list[dict[str, Any]], tokenizer: Any, reward: Any, reporter: Any
) -> str:
    """One episode whose assistant turns are scripted (the row's demonstration, else one
    well-typed call of the first tool), played through the environment behind its bounds,
    scored by the training reward and rendered through the real chat template: the plumbing
    a random stand-in cannot show. Kept as a trace of phase `scripted`; returns the fact."""
    from posttrain.environments.bounded import tool_schemas
    from posttrain.environments.scenarios import typed_call
    from posttrain.environments.transcript import episode_line
    from posttrain.gpu.environment import EpisodeDescriber, environment_class
    from posttrain.gpu.episodes import picked_with, run_call, with_observation
    from posttrain.rewards.guards import score_rows
    from posttrain.rewards.tool_call import normalise_calls

    env_spec = spec.environment
    column = env_spec.demo_column
    with_demo = [r for r in rows if column and r.get(column) not in (None, "", [])]
    row = (with_demo or rows)[0]
    env = environment_class(spec)()
    prompt = with_observation(row["prompt"], env.reset(**row))
    schemas = tool_schemas(env)
    calls = normalise_calls(row[column]) if with_demo else [typed_call(schemas[0])]
    calls = calls[: env_spec.max_turns]
    tools = {s["function"]["name"] for s in schemas}
    messages: list[dict[str, Any]] = []
    for name, arguments in calls:
        wire = {"type": "function", "function": {"name": name, "arguments": arguments}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [wire]})
        result = run_call(env, tools, name, arguments)
        messages.append({"role": "tool", "name": name, "content": result})
    messages.append({"role": "assistant", "content": "Done."})
    scores = score_rows(reward, [messages], picked_with([row], [env]))
    described = EpisodeDescriber(tokenizer, spec.model.template_kwargs())(prompt, messages, env)
    trace = {
        "step": 0,
        "idx": 0,
        "group": 0,
        "prompt": row["prompt_text"],
        "completion": episode_line(described["episode"]),
        "reward": scores.rewards[0],
        "components": scores.row(0),
        "scripted": "the row's demonstration" if with_demo else "one call of the first tool",
        **described,
    }
    reporter.trace(0, [trace], phase="scripted")
    read = described["episode"]
    return (
        f"a scripted episode ({trace['scripted']}: {read['tool_calls']} call(s), "
        f"{read['tool_errors']} failed) played through your environment behind its bounds "
        f"(max_turns {env_spec.max_turns}, {env_spec.tool_timeout_s:g} s a call, "
        f"{env_spec.max_result_chars:,} characters a result), scored {scores.rewards[0]:g} by the "
        f"training reward ({', '.join(f'{k} {v:g}' for k, v in scores.row(0).items())}), and "
        f"rendered through the real chat template (trace phase `scripted`)"
    )
