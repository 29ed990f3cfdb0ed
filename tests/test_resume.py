"""resume_from continues at the next step: no step replayed, the optimizer never stepped twice.

A run stopped part-way and resumed must end with exactly the weights of the same run trained
straight through (CPU, fixed seed): any replayed batch or doubled optimizer step changes them.
"""

import json
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from posttrain.gpu.train import train
from posttrain.runs.layout import CANCEL_REQUEST, iter_events
from posttrain.spec import load_spec

pytestmark = pytest.mark.slow

STEPS = 6


def spec(kind: str, **extra):
    algorithm = {
        "kind": kind,
        "steps": STEPS,
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
def test_a_resumed_run_ends_exactly_where_the_straight_run_does(tmp_path, kind):
    root = tmp_path / "runs"
    straight, first, second = root / "run-straight-1", root / "run-first-1", root / "run-second-1"
    assert train(spec(kind), straight) == "succeeded"

    stop_after_step(first, 2)
    assert train(spec(kind), first) == "cancelled"
    stopped_at = max(metric_steps(first))
    assert 2 <= stopped_at < STEPS

    assert train(spec(kind, resume_from=first.name), second) == "succeeded"
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


def test_resuming_a_run_without_checkpoints_is_a_clear_error(tmp_path):
    root = tmp_path / "runs"
    (root / "run-empty-1").mkdir(parents=True)
    assert train(spec("sft", resume_from="run-empty-1"), root / "run-next-1") == "failed"
    result = next(e for e in iter_events(root / "run-next-1") if e["type"] == "result")
    assert "saved no checkpoint" in result["cause"]
