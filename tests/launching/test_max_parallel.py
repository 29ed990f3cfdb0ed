"""`sweep.max_parallel`: an experiment's runs beyond the cap are reserved with the rest (one
approval, one ledger transaction) and held; each starts as an earlier one ends, from any
process's poll, also after the server restarts; a cancelled experiment's held runs never start.
On Modal through the real SDK pointed at the fake control plane (tests/modal_fake), and
locally with the tiny model."""

import json
import sqlite3

import pytest

from posttrain.runs.context import Context
from posttrain.runs.held import is_held
from posttrain.tools.launch import launch
from posttrain.tools.plan import plan
from posttrain.tools.runs import cancel_run, get_run
from tests.conftest import kill_leftover_runs, wait_finished
from tests.specs import PAID, tiny

TINY = tiny(steps=2, max_completion_length=16)
MODAL = {**TINY, "compute": {"backend": "modal", "gpu": "A10", "timeout_s": 600}}
SWEEP = {"algorithm.learning_rate": [1e-3, 0.0], "seeds": [0], "max_parallel": 1}


def reserved(home) -> dict[str, float]:
    with sqlite3.connect(home / "budget.sqlite") as db:
        return dict(db.execute("SELECT run_id, reserved_usd FROM spend"))


def call_ids(home, run_ids: list[str]) -> list[str | None]:
    metas = [json.loads((home / "runs" / r / "run.json").read_text()) for r in run_ids]
    return [m.get("call_id") for m in metas]


def test_the_plan_shows_the_waves_and_the_same_price_as_without_the_cap(home):
    sweep = {"algorithm.learning_rate": [1e-5, 5e-5, 1e-4], "seeds": [0, 1]}
    free = plan({**PAID, "sweep": sweep})
    capped = plan({**PAID, "sweep": {**sweep, "max_parallel": 2}})
    assert capped.cost == free.cost  # the same runs, each billed for its own time
    e = capped.experiment
    assert (e.max_parallel, e.waves) == (2, 3)
    one = free.experiment.wall_time_s
    assert e.wall_time_s == pytest.approx(3 * one, rel=0.01)
    assert "3 waves" in e.parallel and "The price is the same as without the cap" in e.parallel
    assert free.experiment.max_parallel is None and free.experiment.waves == 1


def test_the_cap_reaches_the_plan_over_mcp_and_from_the_cli(home, tmp_path):
    import asyncio

    import yaml
    from mcp import Client
    from typer.testing import CliRunner

    from posttrain.cli.app import app
    from posttrain.server.app import build_server

    spec = {**PAID, "sweep": {"algorithm.learning_rate": [1e-5, 5e-5, 1e-4], "max_parallel": 2}}

    async def over_mcp():
        async with Client(build_server(), mode="legacy") as client:
            return (await client.call_tool("plan", {"spec": spec})).structured_content

    planned = asyncio.run(over_mcp())["experiment"]
    assert (planned["max_parallel"], planned["waves"]) == (2, 2)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(spec))
    shown = CliRunner().invoke(app, ["plan", str(path)], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "2 waves" in shown.output and "The price is the same" in " ".join(shown.output.split())


def test_a_bad_max_parallel_is_refused_naming_the_field(home):
    from posttrain.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"sweep.max_parallel"):
        plan({**PAID, "sweep": {**SWEEP, "max_parallel": 0}})


@pytest.mark.slow
def test_on_modal_one_run_at_a_time_the_queue_outlives_a_restart(modal_fake, home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "2")
    started = launch({**MODAL, "sweep": SWEEP}, ctx=Context())
    assert started.status == "started", started.message
    first, second = started.run_ids
    assert "1 queued" in started.message
    assert set(reserved(home)) == {first, second}  # both known to the ledger before either ran
    assert call_ids(home, [first, second])[1] is None and len(modal_fake.calls) == 1
    assert get_run(second, ctx=Context()).status == "queued"
    (home / "index.sqlite").unlink()  # the server restarts with nothing but the run folders
    fresh = Context()
    assert wait_finished(first, 240, fresh).status == "succeeded"
    assert wait_finished(second, 240, fresh).status == "succeeded"
    calls = [modal_fake.calls[c] for c in call_ids(home, [first, second])]
    assert len(modal_fake.calls) == 2
    # never two at once: the second container started after the first one's had ended
    assert calls[1].attempts[0].started >= calls[0].attempts[-1].ended - 1.0


@pytest.mark.slow
def test_a_cancelled_experiments_queued_runs_never_start_on_modal(modal_fake, home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "2")
    sweep = {**SWEEP, "algorithm.learning_rate": [1e-3, 5e-4, 0.0]}
    long = {**MODAL, "algorithm": {**MODAL["algorithm"], "steps": 400}}
    ctx = Context()
    started = launch({**long, "sweep": sweep}, ctx=ctx)
    held = started.run_ids[1:]
    assert all(is_held(home / "runs" / r) for r in held)
    result = cancel_run(started.group_id, ctx=ctx)
    assert result.stopped and {c.status for c in result.runs} == {"cancelled"}
    assert all("cancelled while queued" in get_run(r, ctx=ctx).cause for r in held)
    Context().refresh()  # a later poll finds no place to fill
    assert call_ids(home, held) == [None, None] and len(modal_fake.calls) == 1


@pytest.mark.slow
def test_locally_the_cap_holds_and_each_run_starts_when_the_one_before_ends(home):
    ctx = Context()
    started = launch({**TINY, "sweep": SWEEP}, ctx=ctx)
    try:
        first, second = started.run_ids
        assert is_held(home / "runs" / second) and not is_held(home / "runs" / first)
        assert wait_finished(first, 240, ctx).status == "succeeded"
        assert wait_finished(second, 240, ctx).status == "succeeded"
        meta = json.loads((home / "runs" / second / "run.json").read_text())
        assert meta["released_at"] >= get_run(first, ctx=ctx).ended_at
    finally:
        kill_leftover_runs(home)
