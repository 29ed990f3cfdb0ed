"""Projections from the phase that runs, and estimates only from runs that finished well: a
warm-start step is measured and shown apart from a training step, and a cancelled or failed
run never becomes the measurement the next plan is priced from."""

import json

import pytest

from posttrain.pricing.projection import project
from posttrain.runs.store import Store
from posttrain.spec.schema import load_spec
from posttrain.tools.plan import plan
from tests.run_rows import run_row
from tests.specs import tiny


@pytest.fixture
def store(home):
    return Store(home / "index.sqlite", root=home / "runs")


def measured(store: Store, spec: dict, run_id: str, status: str, step_s: float) -> None:
    shape = json.dumps(load_spec(spec).shape, sort_keys=True)
    store.db.execute(
        "INSERT INTO measured VALUES (?,?,?,?,?,?,?,?,?)",
        (run_id, shape, status, 40, step_s, None, 10.0, None, 1000.0),
    )
    store.db.commit()


def test_a_cancelled_or_failed_run_never_becomes_the_measurement(store):
    spec = tiny(steps=40)
    measured(store, spec, "run-cancelled", "cancelled", 12.1)  # slowed by what stopped it
    measured(store, spec, "run-failed", "failed", 9.0)
    assert plan(spec, index=store).cost.runs_used == []
    measured(store, spec, "run-succeeded", "succeeded", 0.5)
    cost = plan(spec, index=store).cost
    assert cost.runs_used == ["run-succeeded"] and cost.step_s == 0.5


def test_a_warm_start_is_projected_from_its_own_steps_and_training_shown_apart():
    row = run_row(
        status="running", phase="warmstart", step=191, total_steps=300, warmstart_steps=400
    )
    metrics = [{"phase": "warmstart", "step": i, "step_time_s": 1.6} for i in range(1, 192)]
    meta = {"created_at": 1000.0, "step_s": 0.4}  # the plan's training step, not measured
    p = project(row, metrics, meta, timeout_s=None, cost_so_far_usd=0.0, now=1400.0)
    assert p.phase == "warmstart" and p.s_per_step == 1.6 and p.warm_s_per_step == 1.6
    assert p.train_s_per_step == 0.4 and p.train_step_measured is False
    assert p.steps_left == 209 + 300
    assert p.projected_end_at == pytest.approx(1400.0 + 209 * 1.6 + 300 * 0.4)
    assert p.note.startswith(
        "warm-start step 191 of 400: 1.60 s a step measured; then 300 training steps at "
        "0.40 s a step (estimated)"
    )


def test_a_timeout_that_falls_inside_the_warm_start_is_said_to():
    row = run_row(
        status="running", phase="warmstart", step=10, total_steps=300, warmstart_steps=400
    )
    metrics = [{"phase": "warmstart", "step": i, "step_time_s": 2.0} for i in range(1, 11)]
    p = project(row, metrics, {"created_at": 1000.0, "step_s": 0.4}, 600, 0.0, now=1100.0)
    assert p.ends_before_timeout is False
    assert p.note.endswith(
        "the timeout stops it first, during the warm-start, before any training step"
    )
    late = project(row, metrics, {"created_at": 1000.0, "step_s": 0.4}, 900, 0.0, now=1100.0)
    # 800 s left: 390 warm-start steps take 780 s, then 20 s of 0.4 s training steps
    assert late.note.endswith("the timeout stops it first, at about step 50 of 300")


def test_a_plan_with_a_warm_start_prices_its_steps_apart(home):
    spec = tiny(steps=40)
    spec = {**spec, "dataset": {**spec["dataset"], "response_column": "response"}}
    spec["algorithm"] = {**spec["algorithm"], "warmstart": {"steps": 20}}
    cost = plan(spec).cost
    assert cost.warm_steps == 20 and cost.warm_step_s > 0
    assert f"after 20 warm-start steps at {cost.warm_step_s:.2f} s" in cost.summary
