"""Held-out evaluation during training: the curve a real tiny run writes, and the warning when
the training reward rises while the held-out reward does not (hand-made curves)."""

import pytest

from posttrain.reports.health import heldout_stalls
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run
from tests.conftest import kill_leftover_runs, wait_finished
from tests.specs import tiny


def steps(rewards):
    return [{"step": i + 1, "reward": r} for i, r in enumerate(rewards)]


RISING = steps([0.1] * 10 + [0.6] * 10)  # the training reward: 0.10 -> 0.60


def test_a_training_reward_that_rises_alone_is_flagged():
    flat = [{"step": s, "reward": r, "n": 16} for s, r in ((0, 0.2), (10, 0.22), (20, 0.21))]
    warning = heldout_stalls(RISING, flat, span=1.0)
    assert warning.startswith("the training reward rose 0.10 -> 0.60 while the held-out reward")
    assert "0.20 at step 0 -> 0.21 at step 20, 16 prompts" in warning


def test_a_held_out_reward_that_follows_is_not_flagged():
    follows = [{"step": s, "reward": r, "n": 16} for s, r in ((0, 0.2), (10, 0.4), (20, 0.5))]
    assert heldout_stalls(RISING, follows, span=1.0) is None  # +0.3 of +0.5: carries over
    assert heldout_stalls(RISING, follows[:2], span=1.0) is None  # two points: too few
    small = steps([0.1] * 10 + [0.15] * 10)  # +0.05 of a range of 1: no rise worth judging
    assert heldout_stalls(small, follows[:1] * 3, span=1.0) is None


@pytest.mark.slow
def test_a_run_with_eval_every_writes_a_held_out_curve(home):
    spec = tiny(kind="sft", steps=4, eval_every=2, eval_tasks=3, learning_rate=1e-2)
    spec["dataset"] = {**spec["dataset"], "holdout_share": 0.1, "response_column": "response"}
    run_id = launch(spec).run_id
    try:
        detail = wait_finished(run_id, 300)
    finally:
        kill_leftover_runs(home)
    assert detail.status == "succeeded", detail.cause
    curve = get_run(run_id).heldout
    assert [p["step"] for p in curve] == [0, 2, 4]  # before step 1, then every 2
    assert all(p["n"] == 3 and 0.0 <= p["reward"] <= 1.0 for p in curve)
    assert all(p["reference_nll"] > 0 for p in curve)  # rhyme-gym rows carry references
    assert curve[0]["reference_nll"] != curve[-1]["reference_nll"]  # training moved the model
