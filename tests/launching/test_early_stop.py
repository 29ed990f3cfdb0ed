"""sweep.early_stop: at its checkpoint, an arm beyond noise behind the leader (its training
reward per prompt, from the traces the real run store indexed) is cancelled through the
normal cancel path, and the decision, with the money saved, is kept where the experiment and
its runs are shown; an arm within noise of the leader goes on. Real tiny GRPO runs, locally
and on the Modal double, scored by a user's reward file that pays longer answers (so one arm,
cut to 2 tokens, is behind from its first step)."""

import json
import subprocess
import sys
import urllib.request

import pytest

from posttrain.core.errors import ConfigError
from posttrain.runs.context import Context
from posttrain.runs.layout import has_result
from posttrain.tools.experiments import experiment_view
from posttrain.tools.launch import launch
from posttrain.tools.plan import plan
from posttrain.tools.runs import cancel_run, get_run, list_runs
from tests.conftest import kill_leftover_runs, wait_for
from tests.dashboard.conftest import dashboard
from tests.specs import PAID, tiny

REWARD = """
def longer(completions, **columns):
    return [min(1.0, len(str(c).split()) / 8) for c in completions]
"""
STOP = {"at_step": 4, "window": 4}


def experiment(tmp_path, values: dict, steps: int = 300) -> dict:
    (tmp_path / "longer.py").write_text(REWARD)
    return {
        **tiny(steps=steps, max_completion_length=16, traces={"every": 1, "samples": 8}),
        "reward": {"name": f"{tmp_path / 'longer.py'}:longer"},
        "sweep": {**values, "seeds": [0], "early_stop": STOP},
    }


def decided(experiment_id: str, ctx: Context):
    def ready():
        list_runs(ctx=ctx)  # every poll checks the experiment, as any client's would
        decision = experiment_view(experiment_id, ctx).early_stop
        return decision if decision and decision["decided_at"] else None

    return wait_for(ready, timeout_s=300, every_s=0.5)


def test_the_plan_says_when_arms_stop_and_what_a_stopped_run_saves(home):
    sweep = {"algorithm.learning_rate": [1e-5, 5e-5], "early_stop": {"at_fraction": 0.25}}
    spec = {**PAID, "algorithm": {"steps": 100, "traces": {"every": 5}}, "sweep": sweep}
    result = plan(spec)
    cost = result.experiment.arms[0].cost
    said = result.experiment.early_stop
    assert "at step 25 of 100" in said and "steps 14-25" in said
    one_run = 75 * cost.step_s * cost.container_usd_per_s
    assert f"about ${one_run:.2f}" in said


def test_early_stop_is_refused_for_kinds_without_a_per_prompt_training_score(home):
    sft = {**PAID, "algorithm": {"kind": "sft"}}
    with pytest.raises(ConfigError, match=r"sweep\.early_stop.*SFT runs have no per-prompt"):
        plan({**sft, "sweep": {"algorithm.learning_rate": [1e-5, 5e-5], "early_stop": STOP}})


def test_an_early_stop_with_no_traced_step_in_its_window_names_the_traces(home):
    sweep = {"algorithm.learning_rate": [1e-5, 5e-5], "early_stop": {"at_step": 20, "window": 5}}
    with pytest.raises(ConfigError, match=r"'algorithm.traces'.*traces\.every to at most 5"):
        plan({**PAID, "sweep": sweep})
    with pytest.raises(ConfigError, match=r"sweep\.early_stop.*one of at_step"):
        plan({**PAID, "sweep": {**sweep, "early_stop": {"window": 5}}})


@pytest.mark.slow
def test_locally_the_arm_behind_beyond_noise_stops_and_the_leader_goes_on(
    home, tmp_path, monkeypatch
):
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "2")  # both arms train at once
    ctx = Context()
    started = launch(experiment(tmp_path, {"algorithm.max_completion_length": [16, 2]}), ctx=ctx)
    try:
        long_run, short_run = started.run_ids
        decision = decided(started.group_id, ctx)
        assert decision["leader"] == "max_completion_length=16"
        assert decision["stopped"] == ["max_completion_length=2"]
        assert decision["runs_stopped"] == [short_run]
        arms = decision["arms"]
        assert arms["max_completion_length=2"]["mean"] < arms["max_completion_length=16"]["mean"]
        assert get_run(short_run, ctx=ctx).status == "cancelled"
        assert get_run(long_run, ctx=ctx).status == "running"  # the leader is never stopped
        shown = {r.run_id: r.stopped_early for r in list_runs(ctx=ctx)}
        assert "beyond noise behind max_completion_length=16 at step 4" in shown[short_run]
        assert shown[long_run] is None
        assert decision["saved_usd"] == 0.0  # this machine is free
        with dashboard(home) as url:  # the experiment's page shows the decision
            page = urllib.request.urlopen(f"{url}/experiments/{started.group_id}", timeout=30)
            html = page.read().decode()
            page.close()
        assert 'id="early-stop"' in html and "max_completion_length=2" in html
    finally:
        cancel_run(started.group_id, grace_s=5, ctx=ctx)
        kill_leftover_runs(home)


@pytest.mark.slow
def test_arms_within_noise_of_each_other_all_go_on(home, tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "2")
    ctx = Context()
    # two arms that train alike (the timeout is no part of training): nothing between them
    started = launch(experiment(tmp_path, {"compute.timeout_s": [3000, 3600]}), ctx=ctx)
    try:
        decision = decided(started.group_id, ctx)
        assert decision["stopped"] == [] and decision["runs_stopped"] == []
        assert "every arm goes on" in decision["reason"]
        assert {get_run(r, ctx=ctx).status for r in started.run_ids} == {"running"}
    finally:
        cancel_run(started.group_id, grace_s=5, ctx=ctx)
        kill_leftover_runs(home)


POLLER = """
import json, sys, time
from posttrain.tools.experiments import experiment_view
from posttrain.tools.runs import list_runs
from posttrain.runs.context import Context

ctx, deadline = Context(), time.time() + 240
while time.time() < deadline:
    list_runs(ctx=ctx)
    found = experiment_view(sys.argv[1], ctx).early_stop
    if found and found["decided_at"]:
        print(json.dumps(found))
        break
    time.sleep(0.2)
"""


@pytest.mark.slow
def test_pollers_in_four_processes_make_one_decision_and_one_cancel(home, tmp_path, monkeypatch):
    """The server, a CLI and a dashboard may all poll an experiment at once: one of them
    decides, the others read its decision; the behind arm is cancelled and told so once."""
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "2")
    started = launch(experiment(tmp_path, {"algorithm.max_completion_length": [16, 2]}))
    try:
        pollers = [
            subprocess.Popen(
                [sys.executable, "-c", POLLER, started.group_id], stdout=subprocess.PIPE, text=True
            )
            for _ in range(3)
        ]
        mine = decided(started.group_id, Context())
        seen = [json.loads(p.communicate(timeout=300)[0]) for p in pollers]
        assert all(s == mine for s in seen)  # one decision, read by all
        short_run = started.run_ids[1]
        assert mine["runs_stopped"] == [short_run]
        events = [
            json.loads(line)
            for line in (home / "runs" / short_run / "events.jsonl").read_text().splitlines()
        ]
        said = [e for e in events if "stopped early" in str(e.get("message"))]
        ended = [e for e in events if e["type"] == "result"]
        assert len(said) == 1 and [e["status"] for e in ended] == ["cancelled"]
    finally:
        cancel_run(started.group_id, grace_s=5, ctx=Context())
        kill_leftover_runs(home)


@pytest.mark.slow
def test_an_experiment_whose_runs_all_end_unpolled_says_its_early_stop_was_not_applied(
    home, tmp_path, monkeypatch
):
    """The early stop is checked on polls: runs that end before any poll find every arm past
    the checkpoint were never compared, and the experiment says so instead of nothing."""
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "2")
    ctx = Context()
    spec = experiment(tmp_path, {"algorithm.max_completion_length": [16, 2]}, steps=6)
    started = launch(spec, ctx=ctx)
    said = experiment_view(started.group_id, ctx).early_stop
    assert said["decided_at"] is None and said["window"] == [1, 4]
    assert said["reason"].startswith("not decided yet: on the first poll after"), said
    runs = [home / "runs" / r for r in started.run_ids]
    wait_for(lambda: all(has_result(r) for r in runs), timeout_s=300)  # no poll meanwhile
    said = experiment_view(started.group_id, ctx).early_stop
    assert said["decided_at"] is None and said["stopped"] == [], said
    assert said["reason"].startswith("not applied: every run ended before a poll"), said
    assert "checked on get_run and list_runs" in said["reason"]


@pytest.mark.slow
def test_on_modal_the_stopped_arm_saves_its_remaining_steps_at_its_priced_step(
    modal_fake, home, tmp_path, monkeypatch
):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "5")
    # 1000 steps: the short arm must not end on its own before the leader's container, which
    # may start well after it on a loaded machine, is past the checkpoint
    spec = experiment(tmp_path, {"algorithm.max_completion_length": [16, 2]}, steps=1000)
    spec["compute"] = {"backend": "modal", "gpu": "A10", "timeout_s": 1200}
    ctx = Context()
    started = launch(spec, ctx=ctx)
    try:
        short_run = started.run_ids[1]
        decision = decided(started.group_id, ctx)
        assert decision["runs_stopped"] == [short_run]
        row = get_run(short_run, ctx=ctx)
        assert row.status == "cancelled"
        meta = json.loads((home / "runs" / short_run / "run.json").read_text())
        left = 1000 - row.step  # its steps not taken, at the plan's step and the container's $/s
        expect = left * meta["step_s"] * meta["container_usd_per_s"]
        assert decision["saved_usd"] == pytest.approx(expect, rel=0.05)
        assert decision["saved_usd"] > 0
    finally:
        cancel_run(started.group_id, ctx=ctx)


@pytest.mark.slow
def test_on_modal_a_run_that_ended_before_its_end_was_read_here_is_not_counted_as_stopped(
    modal_fake, home, tmp_path, monkeypatch
):
    """The decision saw a Modal run still training (its mirror here a few polls behind); by
    its cancel, the run had succeeded on the Volume. Cancelling it stops nothing: it is no
    stopped run, saves nothing, and keeps its own end."""
    from posttrain.launching.early_stop import _stop

    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "5")
    spec = {**experiment(tmp_path, {}, steps=6), "compute": {"backend": "modal", "gpu": "A10"}}
    spec.pop("sweep")
    ctx = Context()
    run_id = launch(spec, ctx=ctx).run_id
    run_dir = home / "runs" / run_id
    call_id = json.loads((run_dir / "run.json").read_text())["call_id"]
    assert modal_fake.wait(call_id, 240)  # ended there; here it is still as launched
    assert not has_result(run_dir)
    assert not _stop(ctx, run_dir, ctx.index.get(run_id))
    assert get_run(run_id, ctx=ctx).status == "succeeded"
