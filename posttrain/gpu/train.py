"""The training entrypoint: `train(spec, run_dir)` runs the spec's algorithm (posttrain.algorithms;
its trainer named in posttrain.gpu.phases) with TRL and peft LoRA.

The same function runs in a local subprocess (`python -m posttrain.gpu.train RUN_DIR`) and
inside the Modal function: CUDA with bf16 when a GPU is present, the CPU otherwise. It
assumes nothing about the machine beyond the run directory, and reports everything there.

Stages: preparing -> loading_model -> [warmstart] -> proof_step -> training -> saving ->
succeeded | failed | cancelled. A dry run (`model.stand_in`, posttrain.gpu.dryrun) adds
resume_check after training and eval_check after saving, and reports what it proved.
Before step 1 it refuses work that would waste GPU time: rows that do not render through the
chat template, prompts over the length limit, a reward that is constant on the references.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.data.dataset import Prepared
from posttrain.gpu.committer import saving
from posttrain.gpu.models import Device, base_model
from posttrain.gpu.phases import train_phase
from posttrain.gpu.ranks import SilentReporter, leave, rank
from posttrain.gpu.reporter import (
    Cancelled,
    Reporter,
    quiet_libraries,
    spread,
)
from posttrain.gpu.trainers import Job, warmstart
from posttrain.rewards.base import Reward
from posttrain.rewards.guards import score_rows
from posttrain.rewards.probes import Distribution
from posttrain.rewards.registry import get_reward
from posttrain.runs.layout import (
    HOLDOUT,
    RUN_META,
    SPEC,
    check_run_id,
    read_json,
    write_rows_atomic,
)
from posttrain.spec.schema import RunSpec, load_spec

PROMPT_OVERFLOW_TOLERANCE = 0.01  # share of prompts over the limit that are dropped, not refused


def preflight(
    spec: RunSpec, data: Prepared, tokenizer: Any, reward: Reward | None, reporter: Reporter
) -> tuple[Prepared, str]:
    """Refuse, before step 1, what would waste a run; returns the rows that fit, and what
    was checked in one line."""
    kwargs = spec.model.template_kwargs()
    missing = [c for c in (reward.columns if reward else ()) if c not in data.train[0]]
    if missing and spec.reward:
        raise ConfigError(
            f"reward '{spec.reward.name}' needs dataset column(s) {missing}, which the rows lack "
            f"(columns: {sorted(data.train[0])}); set dataset.reference_column or the reward's "
            f"column parameter"
        )
    lengths = []
    for i, row in enumerate(data.train):
        try:
            text = tokenizer.apply_chat_template(
                row["prompt"],
                tokenize=False,
                add_generation_prompt=True,
                tools=row.get("tools"),
                **kwargs,
            )
        except Exception as exc:  # jinja and template errors come in many types
            raise ConfigError(
                f"row {i} (id {row['id']}) does not render through the model's chat template: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        lengths.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    limit = spec.algorithm.max_prompt_length
    over = [i for i, n in enumerate(lengths) if n > limit]
    if len(over) > PROMPT_OVERFLOW_TOLERANCE * len(lengths):
        raise ConfigError(
            f"{len(over)} of {len(lengths)} prompts are longer than max_prompt_length={limit} "
            f"tokens (longest {max(lengths)}); raise algorithm.max_prompt_length or filter long "
            f"rows with dataset.filters"
        )
    if over:
        reporter.log(f"dropped {len(over)} prompts over {limit} tokens", level="warning")
        skip = set(over)
        data.train = [r for i, r in enumerate(data.train) if i not in skip]
    summary = (
        f"{len(data.train)} training rows, {len(data.holdout)} held out, "
        f"{data.dropped_by_filters} dropped by filters; every prompt rendered through the chat "
        f"template: prompt tokens p50 {int(statistics.median(lengths))}, max {max(lengths)} "
        f"(limit {limit})"
    )
    reporter.log(summary)
    # an environment's reward reads episodes, not texts: check_environment probes it; a
    # judge's would cost ~100 calls: check_reward probes a judge, asked like any spend
    plain = reward is not None and not reward.judged
    if plain and algorithm_of(spec).rewarded and spec.environment is None:
        check_reward_signal(spec, data, reward)
    return data, summary


def check_reward_signal(spec: RunSpec, data: Prepared, reward: Reward) -> None:
    """A reward that scores references, echoed prompts and empty answers all alike reads the
    wrong field (or nothing): GRPO would learn nothing from it."""
    rows = [data.train[i] for i in spread(len(data.train), 32)]
    references = [
        str(r.get("reference") or r.get(spec.dataset.reference_column or "") or "") for r in rows
    ]
    answers = "references"
    if not any(references) and reward.columns:  # no reference: the column the reward reads
        column = reward.columns[0]  # (a label, a total), as reward check takes it
        references, answers = [str(r.get(column) or "") for r in rows], f"its column '{column}'"
    values: list[float] = []
    for responses in (references, [r["prompt_text"] for r in rows], [""] * len(rows)):
        values += score_rows(reward, responses, rows).rewards
    degenerate = Distribution.of(values).degenerate
    if degenerate and spec.reward:
        raise ConfigError(
            f"reward '{spec.reward.name}' is {degenerate} on {answers}, echoed prompts and empty "
            f"answers alike ({values[0]:.3f}): it probably reads the wrong field or ignores the "
            f"completion. Run `posttrain reward check` on the data before training"
        )


def train(run_dir: Path, spec: RunSpec | None = None) -> str:
    """Run the training of run_dir (its spec.json, unless `spec` is given); returns the
    final status. Never raises for a run that failed: the failure is in the events, with
    its cause."""
    spec = spec or load_spec(run_dir / SPEC)
    reporter = Reporter(run_dir) if rank() == 0 else SilentReporter(run_dir)
    reporter.install_signal_handlers()
    try:
        return _train(spec, run_dir, reporter)
    except Cancelled:
        if reporter.timed_out:
            reporter.result("failed", cause=f"{reporter.timed_out}, before training finished")
            return "failed"
        reporter.result("cancelled", cause="cancelled before training finished")
        return "cancelled"
    except Exception as exc:
        reporter.failure(exc)
        return "failed"
    finally:
        reporter.close()


def _train(spec: RunSpec, run_dir: Path, reporter: Reporter) -> str:
    quiet_libraries()
    a = spec.algorithm
    reporter.stage("preparing")
    data = algorithm_of(spec).prepare(spec.dataset)
    if rank() == 0:
        write_rows_atomic(run_dir / HOLDOUT, data.holdout)
    reward = get_reward(spec.reward.name, spec.reward.params) if spec.reward else None
    if reward is not None and (answered := reward.ready()):  # a judge down fails here
        reporter.log(answered)
    if spec.environment is not None:
        reporter.log(
            f"episodes in environment {spec.environment.name or spec.environment.tools}: "
            f"scored by its get_reward()"
            + (f" plus reward '{spec.reward.name}'" if spec.reward else "")
            + f"; at most {spec.environment.max_turns} tool-calling turns an episode"
        )
    elif reward is None:
        reporter.log(
            f"no reward: {algorithm_of(spec).title} trains without one; traces are not "
            f"scored, and the held-out curve (eval_every) shows the references' likelihood "
            f"(reference_nll)"
        )
    reporter.check_cancel()

    reporter.stage("loading_model")
    device = Device.detect()
    model_path = base_model(run_dir, spec)
    loaded = tokenizer_for(spec)
    tokenizer = loaded.tokenizer
    reporter.log(f"tokenizer: {loaded.described}")
    reporter.log(
        f"model {spec.model.name} from {model_path} on {device.name}"
        f"{' (bf16)' if device.bf16 else ''}; {'LoRA' if a.lora else 'full fine-tune'}"
    )
    dry = None
    if spec.model.stand_in:
        from posttrain.gpu.dryrun import DryRun
        from posttrain.gpu.standin import stand_in_for

        dry = DryRun(stand_in_for(spec.model.name).described, loaded.described)
        reporter.log(f"dry run on a {dry.stand_in}: rewards and losses here mean nothing")
    data, checked = preflight(spec, data, tokenizer, reward, reporter)
    if dry:
        dry.saw(f"your data and template: {checked}; tokenizer: {loaded.described}")
        dry.saw(library_versions())
    reporter.check_cancel()

    resume = resume_point(run_dir, spec)
    if resume is not None and checkpoint_step(resume) >= a.steps and not dry:
        return finish_from(Path(resume), run_dir, tokenizer, reporter)
    if resume is not None:
        if (run_dir / "warmstart").is_dir():  # a restart of this run after its warm-start
            model_path = str(run_dir / "warmstart")
        reporter.log(
            f"resuming from {resume} (model {model_path}); training continues at step "
            f"{checkpoint_step(resume) + 1}"
        )
    elif a.warmstart:  # only a kind that takes one has one (the spec says)
        warm = Job(spec, model_path, tokenizer, data.train, run_dir, reporter, device, reward)
        model_path = warmstart(warm, run_dir)
        if dry:
            dry.saw(f"the SFT warm-start ({a.warmstart.steps} steps) and its merged model")

    if spec.environment is not None:  # episodes: get_reward plus the spec's reward
        from posttrain.gpu.environment import episode_reward

        reward = episode_reward(reward)
    if dry and spec.environment is not None:
        from posttrain.gpu.dryrun import RANDOM_MODEL_TOOLS, scripted_episode

        dry.saw(scripted_episode(spec, data.train, tokenizer, reward, reporter))
        dry.also_cannot.append(RANDOM_MODEL_TOOLS)
    if dry and (cannot := algorithm_of(spec).dry_cannot):
        dry.also_cannot.append(cannot)
    reporter.stage("proof_step")
    out = run_dir / "checkpoints"
    job = Job(spec, model_path, tokenizer, data.train, out, reporter, device, reward, data.holdout)
    if dry:
        from posttrain.gpu.dryrun import train_with_resume

        trainer = train_with_resume(job, dry)
    else:
        trainer = train_phase(job, resume=resume)

    reporter.stage("saving")
    final = run_dir / "final"
    with saving(run_dir) if rank() == 0 else contextlib.nullcontext():
        trainer.save_model(str(final))  # the main process only, under data parallel
        if rank() == 0:
            tokenizer.save_pretrained(str(final))
    step = trainer.state.global_step
    reporter.checkpoint(step, final)
    if reporter.timed_out and step < a.steps:
        reporter.result(
            "failed",
            cause=f"{reporter.timed_out}: stopped after step {step} of {a.steps}; the model so "
            f"far is in final/ (raise compute.timeout_s, or resume_from this run)",
            step=step,
            path="final",
        )
        return "failed"
    if reporter.should_stop() and step < a.steps:
        reporter.result(
            "cancelled", cause=f"cancelled by request after step {step}", step=step, path="final"
        )
        return "cancelled"
    if dry:
        from posttrain.gpu.dryrun import EVAL_PROMPTS, evaluation_pass

        reporter.stage("eval_check")
        held_out = bool(data.holdout)
        rows = (data.holdout or data.train)[:EVAL_PROMPTS]
        evaluation_pass(run_dir, rows, reward, spec, reporter, step)
        dry.saw(
            f"evaluate's generation path: the base and the trained arm (final/ attached) each "
            f"sampled {len(rows)} {'held-out' if held_out else 'training (no holdout)'} "
            f"prompt(s), {'scored by the reward' if reward else 'unscored (no reward given)'}"
        )
    usage = reward.usage() if reward is not None else None
    if usage:  # what the judge cost: said in the log, and in the dry run's report
        reporter.log(judge_line(usage))
    if dry:
        dry.judge = usage
        reporter.events.write("dry_run", durable=True, **dry.report())
    reporter.result("succeeded", step=step, path="final")
    return "succeeded"


def library_versions() -> str:
    """The libraries this dry run trained with: the versions the Modal image installs."""
    from posttrain.core.build import image_pins, python_version

    main = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")
    pins = [p.replace("==", " ") for p in image_pins() if p.split("==")[0] in main]
    return (
        f"the libraries a Modal run trains with: {', '.join(pins)} on Python "
        f"{python_version()} (the Modal image installs the versions installed here; a launch "
        f"refuses a deploy made from other ones)"
    )


def judge_line(usage: dict[str, Any]) -> str:
    return (
        f"judge at {usage['endpoint']} ({usage['mode']} mode): {usage['requests']} requests, "
        f"{usage['cache_hits']} verdicts from the cache, {usage['ungraded']} of "
        f"{usage['judged']} answers it could not grade (scored None, not trained on)"
    )


# What a checkpoint holds beyond what Trainer.save_model writes to final/: the state to resume
# from (training_args.bin is in both).
TRAINING_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state*.pth", "trainer_state.*")


def finish_from(checkpoint: Path, run_dir: Path, tokenizer: Any, reporter: Reporter) -> str:
    """A restart after the run's last checkpoint (Modal retries an input whose container died
    between that save and the result): nothing is left to train, and final/ is the checkpoint's
    model. Trainer.train from a checkpoint at max_steps would train one step more (transformers
    5.25 checks for the end only after a step)."""
    step = checkpoint_step(checkpoint)
    reporter.log(f"{checkpoint.name} is the run's last step: nothing is left to train")
    reporter.stage("saving")
    final = run_dir / "final"
    if rank() == 0:
        with saving(run_dir):
            shutil.rmtree(final, ignore_errors=True)
            shutil.copytree(checkpoint, final, ignore=shutil.ignore_patterns(*TRAINING_STATE))
            tokenizer.save_pretrained(str(final))
    reporter.checkpoint(step, final)
    reporter.result("succeeded", step=step, path="final")
    return "succeeded"


def tokenizer_for(spec: RunSpec) -> Any:
    """The run's tokenizer (a LoadedTokenizer): the model's real one, wherever it is found."""
    from posttrain.gpu.tokenizers import load_tokenizer as load_real

    return load_real(spec.model.name)


def checkpoint_step(path: str | Path) -> int:
    return int(Path(path).name.rsplit("-", 1)[1])


def _complete(checkpoint: Path) -> bool:
    """The Trainer writes trainer_state.json last (after the weights, optimizer and RNG
    states): a container killed mid-save leaves a checkpoint folder without it, and resuming
    from that fails ("Can't find a valid checkpoint")."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def resume_point(run_dir: Path, spec: RunSpec) -> str | None:
    """The checkpoint training continues from: this run's own last one when it was
    restarted (Modal retries a preempted input), else the one its launch chose to resume
    (run.json `resume`), else None."""
    own = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=checkpoint_step)
    complete = [c for c in own if _complete(c)]
    if complete:
        return str(complete[-1])
    resume = read_json(run_dir / RUN_META).get("resume")
    if resume:
        return str(run_dir.parent / check_run_id(resume["run_id"]) / resume["checkpoint"])
    if spec.resume_from:
        raise ConfigError(
            f"resume_from {spec.resume_from}: this run's launch chose no checkpoint (run.json "
            f"has no resume); launch it through posttrain, which resolves one"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    """`python -m posttrain.gpu.train RUN_DIR`: train the spec.json found there."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m posttrain.gpu.train RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        status = train(run_dir)
    finally:
        leave()
    return 0 if status in ("succeeded", "cancelled") else 1


if __name__ == "__main__":
    sys.exit(main())
