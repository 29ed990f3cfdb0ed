"""The money path: reserve -> submit -> record. One key is one run under concurrency (threads
and processes); nothing runs that the ledger does not know; a slow submit blocks nobody; a
user's reward file never runs in the server."""

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from mcp import Client

from posttrain.core.errors import BackendError, RewardError
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, iter_events, read_json
from posttrain.server.app import build_server
from posttrain.tools.launch import launch
from tests.conftest import ROOT
from tests.doubles import PaidBackendDouble
from tests.specs import PAID


@pytest.fixture
def approved(home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "5")  # the policy approves: no human
    return home


def spend(home) -> dict[str, float]:
    with sqlite3.connect(home / "budget.sqlite") as db:
        return dict(db.execute("SELECT run_id, reserved_usd FROM spend"))


def test_one_key_launched_by_many_threads_at_once_starts_one_run(approved):
    backend = PaidBackendDouble(delay_s=0.5)  # a slow submit widens any race
    outcomes: list[tuple[str, str | None]] = []

    def race():
        ctx = Context(backends={"modal": backend})
        result = launch(PAID, idempotency_key="same-key", ctx=ctx)
        outcomes.append((result.status, result.run_id))

    threads = [threading.Thread(target=race) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(s for s, _ in outcomes)
    assert statuses == ["existing"] * 5 + ["started"]
    assert len({r for _, r in outcomes}) == 1  # all six name the same run
    assert len(backend.started) == 1 and len(spend(approved)) == 1


RACER = """
import json, sys
sys.path.insert(0, {root!r})
from posttrain.runs.context import Context
from posttrain.tools.launch import launch
from tests.doubles import PaidBackendDouble
from tests.specs import PAID
ctx = Context(backends={{"modal": PaidBackendDouble(delay_s=0.5)}})
result = launch(json.loads(sys.argv[1]), idempotency_key="process-key", ctx=ctx)
print(json.dumps([result.status, result.run_id]))
"""


@pytest.mark.slow
def test_one_key_launched_by_many_processes_at_once_starts_one_run(approved, tmp_path):
    script = tmp_path / "racer.py"
    script.write_text(RACER.format(root=str(ROOT)))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), json.dumps(PAID)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert sorted(s for s, _ in results) == ["existing", "existing", "existing", "started"]
    assert len({r for _, r in results}) == 1
    assert len(list((approved / "runs").iterdir())) == 1 and len(spend(approved)) == 1


def test_a_failed_submit_leaves_a_failed_run_and_releases_its_reservation(approved):
    ctx = Context(backends={"modal": PaidBackendDouble(fail=True)})
    with pytest.raises(BackendError, match="nothing is running and the reservation was released"):
        launch(PAID, idempotency_key="k1", ctx=ctx)
    (run_dir,) = list((approved / "runs").iterdir())
    result = next(e for e in iter_events(run_dir) if e["type"] == "result")
    assert result["status"] == "failed" and "ConnectionError" in result["cause"]
    assert spend(approved) == {run_dir.name: 0.0}
    ok = Context(backends={"modal": PaidBackendDouble()})
    assert launch(PAID, idempotency_key="k1", ctx=ok).status == "started"  # the key is free


def test_a_run_that_cannot_be_recorded_after_its_spawn_is_cancelled_and_said_so(
    approved, monkeypatch
):
    from posttrain.runs import backend as backend_module

    backend = PaidBackendDouble()
    real_write = backend_module.write_json_atomic

    def disk_full(path, data):
        if data.get("status") == "submitted":
            raise OSError(28, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(backend_module, "write_json_atomic", disk_full)
    ctx = Context(backends={"modal": backend})
    with pytest.raises(BackendError, match="cancelled at once and its reservation released"):
        launch(PAID, ctx=ctx)
    (run_dir,) = list((approved / "runs").iterdir())
    assert backend.started == backend.withdrawn == [run_dir.name]  # nothing runs unknown
    result = next(e for e in iter_events(run_dir) if e["type"] == "result")
    assert result["status"] == "failed" and "cancelled at once" in result["cause"]
    assert spend(approved) == {run_dir.name: 0.0}
    # the ledger and the backend agree: every run is final or recorded with its call id
    ctx.refresh()
    assert [r.status for r in ctx.index.list_runs()] == ["failed"]


def test_a_slow_submit_does_not_hold_a_launch_with_another_key(approved):
    submitting, release = threading.Event(), threading.Event()

    class SlowForA(PaidBackendDouble):
        def submit(self, plan, run_dir):
            if plan.key == "a":
                submitting.set()
                release.wait(timeout=30)  # "a" submits until "b" has launched (or the bound)
            return super().submit(plan, run_dir)

    backend = SlowForA()
    ctx = Context(backends={"modal": backend})
    slow = threading.Thread(
        target=launch, args=(PAID,), kwargs={"idempotency_key": "a", "ctx": ctx}
    )
    slow.start()
    assert submitting.wait(timeout=30), "launch 'a' never reached its submit"
    try:
        other = launch(PAID, idempotency_key="b", ctx=Context(backends={"modal": backend}))
        a_still_submitting = slow.is_alive()
    finally:
        release.set()
        slow.join(timeout=30)
    assert other.status == "started" and a_still_submitting  # "b" did not wait for "a"


def test_the_reserved_run_records_the_plan_for_the_trainer(approved):
    result = launch(PAID, ctx=Context(backends={"modal": PaidBackendDouble()}))
    meta = read_json(approved / "runs" / result.run_id / RUN_META)
    assert meta["status"] == "submitted" and meta["call_id"].startswith("fc-double-")
    assert meta["base"]["run_id"] is None and meta["resume"] is None
    assert meta["seq"] >= 1 and meta["worst_case_usd"] == result.cost.worst_case_usd


SLEEPY_REWARD = (
    "import time\nopen('importing', 'w').close()\ntime.sleep(600)\n\n"
    "def score(completions, **kw):\n    return [0.0]\n"
)


@pytest.mark.parametrize("mode", ("legacy", "2026-07-28"))
def test_a_reward_that_hangs_at_import_never_holds_the_server(home, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "5")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sleepy.py").write_text(SLEEPY_REWARD)
    spec = {"dataset": {"builtin": "rhyme-gym", "n_rows": 64}, "reward": "sleepy.py:score"}
    ctx = Context()

    async def main():
        async with Client(build_server(ctx, roots=[tmp_path, home]), mode=mode) as client:
            started = time.perf_counter()
            launching = asyncio.create_task(client.call_tool("launch", {"spec": spec}))
            for _ in range(100):  # until the launch is inside the reward's import (10 s bound)
                if (tmp_path / "importing").exists() or launching.done():
                    break
                await asyncio.sleep(0.1)
            assert (tmp_path / "importing").exists(), "the reward's import never began"
            asked = time.perf_counter()
            listed = await client.call_tool("list_runs", {})
            listed_s, launch_waiting = time.perf_counter() - asked, not launching.done()
            result = await launching
            return listed, listed_s, launch_waiting, result, time.perf_counter() - started

    listed, listed_s, launch_waiting, result, total = asyncio.run(main())
    assert not listed.is_error and listed_s < 4 and launch_waiting  # answered meanwhile
    assert result.is_error and "did not finish loading reward 'sleepy.py:score'" in (
        result.content[0].text
    )
    assert total < 15
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


def test_the_cli_and_tools_read_a_reward_files_columns_without_importing_it(home, tmp_path):
    from posttrain.launching.columns import reward_columns

    marker = tmp_path / "imported"
    (tmp_path / "mine.py").write_text(
        f"open({str(marker)!r}, 'a').write('x')\n"
        "def score(completions, gold, **kw):\n    return [0.0 for _ in completions]\n"
    )
    assert reward_columns(f"{tmp_path}/mine.py:score", {}) == ["gold"]
    assert marker.read_text() == "x"  # imported once, in the child, and never here:
    mine = str((tmp_path / "mine.py").resolve())
    assert not [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == mine]
    with pytest.raises(RewardError, match="has no function 'nope'"):
        reward_columns(f"{tmp_path}/mine.py:nope", {})
