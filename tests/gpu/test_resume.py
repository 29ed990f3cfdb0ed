"""resume_from continues at the next step: no step replayed, the optimizer never stepped twice.

A run stopped part-way and resumed must end with exactly the weights of the same run trained
straight through (CPU, fixed seed): any replayed batch or doubled optimizer step changes them.
"""

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from posttrain.core.errors import ConfigError
from posttrain.launching.resolve import resolve
from posttrain.runs.context import Context
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    EVENTS,
    RUN_META,
    SPEC,
    iter_events,
    write_json_atomic,
)
from posttrain.spec.schema import load_spec

pytestmark = pytest.mark.slow

STEPS = 6


def spec(kind: str, steps: int = STEPS, **extra):
    algorithm = {
        "kind": kind,
        "steps": steps,
        "lora": None,
        "learning_rate": 1e-3,
        "batch_size": 8,
        "max_completion_length": 24,
        "save_every": 1,
        "lr_scheduler": "cosine",
        "traces": {"every": 0, "samples": 2},
    }
    if kind == "grpo":
        algorithm.update(num_generations=4)
    return load_spec(
        {
            "dataset": {
                "builtin": "rhyme-gym",
                "n_rows": 64,
                "system_prompt": "answer in rhyme",
                "response_column": "response",
            },
            "reward": "rhyme",
            "algorithm": algorithm,
            **extra,
        }
    )


def train(run_dir: Path) -> str:
    """posttrain.gpu.train's train, imported when a test runs (the trainer's module pulls in
    transformers and peft: collecting this file stays cheap)."""
    from posttrain.gpu.train import train as run

    return run(run_dir)


def prepared(spec_obj, run_id: str) -> Path:
    """The run folder a launch would reserve (spec.json, and run.json with the plan's base
    and resume point), for training in this process."""
    ctx = Context()
    plan = resolve(spec_obj, ctx)
    run_dir = ctx.root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / SPEC).write_text(plan.spec.to_json())
    write_json_atomic(
        run_dir / RUN_META, {"run_id": run_id, "created_at": time.time(), **plan.run_meta()}
    )
    return run_dir


def metric_steps(run_dir: Path) -> list[int]:
    return [e["step"] for e in iter_events(run_dir) if e["type"] == "metrics"]


def step_tokens(run_dir: Path) -> dict[int, float]:
    """Tokens each logged step processed, from its tokens/s and step time."""
    return {
        e["step"]: e["tokens_per_s"] * e["step_time_s"]
        for e in iter_events(run_dir)
        if e["type"] == "metrics" and "tokens_per_s" in e
    }


def stop_after_step(run_dir: Path, step: int) -> threading.Thread:
    """Ask the run to stop once `step` has been logged (it stops after the step it is in)."""

    def watch():
        deadline = time.time() + 120
        while time.time() < deadline:
            if run_dir.exists() and any(s >= step for s in metric_steps(run_dir)):
                (run_dir / CANCEL_REQUEST).write_text("test")
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["sft", "grpo"])
def test_a_resumed_run_ends_exactly_where_the_straight_run_does(home, kind):
    import torch
    from safetensors.torch import load_file

    straight = prepared(spec(kind), "run-straight-1")
    assert train(straight) == "succeeded"

    first = prepared(spec(kind), "run-first-1")
    stop_after_step(first, 2)
    assert train(first) == "cancelled"
    stopped_at = max(metric_steps(first))
    assert 2 <= stopped_at < STEPS

    second = prepared(spec(kind, resume_from=first.name), "run-second-1")
    assert train(second) == "succeeded"
    assert metric_steps(second) == list(range(stopped_at + 1, STEPS + 1))  # nothing replayed
    # the resumed run's first step counts only its own tokens, not every token since step 1
    assert step_tokens(second)[stopped_at + 1] == pytest.approx(
        step_tokens(straight)[stopped_at + 1], rel=0.2
    )

    final = load_file(second / "final" / "model.safetensors")
    reference = load_file(straight / "final" / "model.safetensors")
    for name, tensor in reference.items():
        assert torch.equal(final[name], tensor), f"{name} differs after resume"
    state = torch.load(
        second / "checkpoints" / f"checkpoint-{STEPS}" / "optimizer.pt", weights_only=False
    )["state"]
    assert {int(s["step"]) for s in state.values()} == {STEPS}  # one optimizer step per step
    trainer_state = json.loads(
        (second / "checkpoints" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text()
    )
    assert trainer_state["global_step"] == STEPS


def test_resuming_a_run_without_checkpoints_is_refused_before_anything_starts(home):
    empty = prepared(spec("sft"), "run-empty-1")  # reserved, never trained
    with pytest.raises(ConfigError, match="saved no checkpoint"):
        resolve(spec("sft", resume_from=empty.name), Context())


def users_lora_grpo(folder: Path, steps: int, **extra):
    """GRPO with LoRA (as the Qwen presets train) on a user's own file, columns and reward."""
    rows = [{"question": f"Un poème sur la mer, n°{i}", "réponse": "la mer"} for i in range(24)]
    data = folder / "poèmes.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    (folder / "my_reward.py").write_text(
        "def longueur(completions, réponse, **kw):\n"
        "    return [min(1.0, len(str(c)) / 40) for c in completions]\n"
    )
    return load_spec(
        {
            "dataset": {
                "path": str(data),
                "prompt_template": "{question}",
                "reference_column": "réponse",
            },
            "reward": f"{folder / 'my_reward.py'}:longueur",
            "algorithm": {
                "kind": "grpo",
                "steps": steps,
                "lora": {"r": 4},
                "batch_size": 8,
                "num_generations": 4,
                "max_completion_length": 16,
                "save_every": 1,
                "traces": {"every": 0, "samples": 2},
            },
            **extra,
        }
    )


@pytest.mark.parametrize("shape", ["sft, full weights", "grpo, LoRA, the user's files"])
def test_a_restart_after_the_last_checkpoint_trains_nothing_and_keeps_its_model(home, shape):
    """Modal retries an input whose container died after the run's last checkpoint and before
    its result: the retry trains no step (Trainer.train would train one past the end) and
    final/ is what the straight run saved, file for file. Resuming such a run for no more
    steps is refused."""
    import torch
    from safetensors.torch import load_file

    home.mkdir(parents=True, exist_ok=True)

    def make(**extra):
        if shape.startswith("sft"):
            return spec("sft", steps=2, **extra)
        return users_lora_grpo(home, 2, **extra)

    run_dir = prepared(make(), "run-restart-1")
    assert train(run_dir) == "succeeded"
    saved = {p.name: p.read_bytes() for p in (run_dir / "final").iterdir()}
    weights_file = "model.safetensors" if shape.startswith("sft") else "adapter_model.safetensors"
    reference = load_file(run_dir / "final" / weights_file)
    lines = (run_dir / EVENTS).read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line).get("stage") == "saving")
    (run_dir / EVENTS).write_text("".join(lines[:cut]))  # the container died here
    shutil.rmtree(run_dir / "final")

    assert train(run_dir) == "succeeded"  # the retry, in the same folder
    retry = list(iter_events(run_dir))[cut:]
    assert not [e["step"] for e in retry if e["type"] == "metrics"]
    assert [e["final"]["step"] for e in retry if e["type"] == "result"] == [2]
    assert sorted(p.name for p in (run_dir / "final").iterdir()) == sorted(saved)
    final = load_file(run_dir / "final" / weights_file)
    assert final.keys() == reference.keys()
    assert all(torch.equal(final[name], tensor) for name, tensor in reference.items())

    with pytest.raises(ConfigError, match=r"algorithm\.steps: 2 leaves nothing to train"):
        resolve(make(resume_from=run_dir.name), Context())


def lora_grpo(steps: int, **extra):
    return load_spec(
        {
            "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "response_column": "response"},
            "reward": "rhyme",
            "algorithm": {
                "kind": "grpo",
                "steps": steps,
                "lora": {"r": 4},
                "learning_rate": 1e-3,
                "batch_size": 8,
                "num_generations": 4,
                "max_completion_length": 16,
                "save_every": 2,
                "traces": {"every": 0, "samples": 2},
                "warmstart": {"steps": 3, "batch_size": 8} if not extra else None,
            },
            **extra,
        }
    )


def weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_resuming_a_resumed_run_and_evaluating_it_keep_the_original_base(home):
    import torch
    from transformers import AutoModelForCausalLM

    from posttrain.gpu.arms import load_arms

    first = prepared(lora_grpo(4), "run-chain-1")
    assert train(first) == "succeeded"
    second = prepared(lora_grpo(6, resume_from=first.name), "run-chain-2")
    assert train(second) == "succeeded"
    third = prepared(lora_grpo(8, resume_from=second.name), "run-chain-3")
    meta = json.loads((third / RUN_META).read_text())
    assert meta["base"] == {
        "run_id": first.name,
        "folder": "warmstart",
        "described": f"the warm-start model of {first.name}",
    }
    assert meta["resume"]["run_id"] == second.name and meta["resume"]["step"] == 6
    assert train(third) == "succeeded"
    assert metric_steps(third) == [7, 8]

    original = weights(AutoModelForCausalLM.from_pretrained(str(first / "warmstart")))
    for run_dir in (second, third):
        base, _, is_adapter = load_arms(run_dir)
        assert is_adapter
        got = weights(base)
        assert got.keys() == original.keys()
        for name, tensor in original.items():
            assert torch.equal(got[name], tensor), f"{run_dir.name}: base {name} differs"


def test_a_checkpoint_cut_off_mid_save_is_never_resumed_from(tmp_path):
    """A container killed while saving leaves checkpoint-N without trainer_state.json (the
    Trainer writes it last); the retry resumes from the last complete one, or from scratch."""
    from posttrain.gpu.train import resume_point
    from posttrain.spec.schema import load_spec

    run_dir = tmp_path / "run-cut-0001"
    (run_dir / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json").write_text(
        '{"global_step": 2}'
    )
    (run_dir / "checkpoints" / "checkpoint-4").mkdir()
    (run_dir / "checkpoints" / "checkpoint-4" / "config.json").write_text("{}")  # cut off here
    spec = load_spec(
        {"model": "tiny-local", "dataset": {"builtin": "rhyme-gym"}, "reward": "rhyme"}
    )
    assert resume_point(run_dir, spec) == str(run_dir / "checkpoints" / "checkpoint-2")
    (run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json").unlink()
    assert resume_point(run_dir, spec) is None  # nothing complete: start again from step 0
