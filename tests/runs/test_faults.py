"""Faults: killed servers and trainers, a corrupted index, a full or read-only disk, rewards
that hang or crash. After each, runs are found with the right status and nothing is lost."""

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from posttrain.runs.context import Context
from posttrain.runs.layout import iter_events
from posttrain.server.app import build_server
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run, list_runs, tail_logs
from tests.conftest import free_port, kill_leftover_runs, wait_for, wait_listening
from tests.runs.test_store import make_run
from tests.specs import tiny

SMALL = tiny(steps=6, max_completion_length=24)


def start_http_server(home: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", "serve", "--http", "--port", str(port)],
        env={**os.environ, "POSTTRAIN_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    wait_listening(port)
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.slow
def test_a_sigkilled_server_finds_its_runs_again_with_the_right_status(home):
    server, url = start_http_server(home)

    async def launch_two():
        async with Client(url, mode="legacy") as client:
            ids = []
            for seed in (1, 2):
                spec = {**SMALL, "algorithm": {**SMALL["algorithm"], "seed": seed}}
                result = await client.call_tool("smoke_run", {"spec": spec, "steps": 3})
                ids.append(result.structured_content["run_id"])
            return ids

    try:
        run_ids = asyncio.run(launch_two())
        os.kill(server.pid, signal.SIGKILL)  # mid-run: the runs are detached from it
        server.wait(10)
        server, url = start_http_server(home)

        async def statuses():
            async with Client(url, mode="2026-07-28") as client:
                listed = (await client.call_tool("list_runs", {})).structured_content["runs"]
                return {r["run_id"]: r["status"] for r in listed}

        done = wait_for(
            lambda: (
                (s := asyncio.run(statuses()))
                and all(s.get(r) == "succeeded" for r in run_ids)
                and s
            ),
            timeout_s=240,
            every_s=2,
        )
        assert set(run_ids) <= set(done)
    finally:
        server.kill()
        kill_leftover_runs(home)


@pytest.mark.slow
def test_trainers_killed_between_writes_leave_readable_runs(home):
    """SIGKILL at random moments: the run ends failed with its cause, every complete event
    survives, a torn tail is reported."""
    rng = random.Random(0)
    for seed in range(2):
        long_run = {**SMALL, "algorithm": {**SMALL["algorithm"], "steps": 400, "seed": seed}}
        run_id = launch(long_run).run_id
        wait_for(lambda r=run_id: get_run(r).phase == "train", timeout_s=120, every_s=0.2)
        time.sleep(rng.uniform(0.2, 2.0))  # a random moment in the middle of the writes
        process = json.loads((home / "runs" / run_id / "process.json").read_text())
        os.kill(process["trainer_pid"], signal.SIGKILL)
        detail = wait_for(
            lambda r=run_id: (d := get_run(r, verbose=True)).status == "failed" and d, timeout_s=60
        )
        assert "killed by SIGKILL" in detail.cause
        written = [e for e in iter_events(home / "runs" / run_id) if e["type"] == "metrics"]
        steps = [m["step"] for m in detail.metrics]
        assert steps == [e["step"] for e in written] == list(range(1, len(steps) + 1))
        assert detail.metrics and detail.torn_lines in (0, 1)
        last_log = tail_logs(run_id, tail=1).lines[0].message
        assert "run failed: trainer killed by SIGKILL" in last_log


def test_a_corrupted_index_is_set_aside_and_rebuilt_with_nothing_lost(home):
    ctx = Context()
    run_dir = make_run(ctx.root)
    before = get_run(run_dir.name, verbose=True, ctx=ctx).metrics
    ctx.index.close()
    index = home / "index.sqlite"
    index.write_bytes(b"this is not a database" * 100)
    fresh = Context()
    assert fresh.index.rebuilt_because.startswith("corrupt")
    assert get_run(run_dir.name, verbose=True, ctx=fresh).metrics == before
    assert list(home.glob("index.sqlite.bad-*"))  # kept for a post-mortem, not deleted


@pytest.fixture
def small_disk(tmp_path):
    """A real 8 MB filesystem for POSTTRAIN_HOME, to fill up or make read-only."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_then_read_only_home_gives_clear_errors_and_runs_stay_readable(
    small_disk, monkeypatch, request
):
    monkeypatch.setenv("POSTTRAIN_HOME", str(small_disk))
    ctx = Context()
    existing = make_run(ctx.root)
    get_run(existing.name, ctx=ctx)  # indexed while the disk had room
    with (small_disk / "filler").open("wb") as f:  # fill every last block
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass

    async def session():
        async with Client(build_server(ctx), mode="legacy") as client:
            started = await client.call_tool("launch", {"spec": SMALL})
            detail = await client.call_tool("get_run", {"run_id": existing.name})
            listed = await client.call_tool("list_runs", {})
            logs = await client.call_tool("tail_logs", {"run_id": existing.name})
            return started, detail, listed, logs

    for state in ("full", "read-only"):
        if state == "read-only":
            # A fresh read-only bind mount of the same disk: remounting the disk itself in
            # place fails with "busy" whenever any file on it is still open for writing,
            # which depends on timing; a new mount has no writers, so this never flakes.
            ctx.index.close()
            view = small_disk.parent / "read-only-view"
            view.mkdir()
            subprocess.run(["mount", "--bind", str(small_disk), str(view)], check=True)
            request.addfinalizer(lambda v=view: subprocess.run(["umount", "-l", str(v)]))
            subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
            monkeypatch.setenv("POSTTRAIN_HOME", str(view))
            ctx = Context()
            assert ctx.index.read_only
        started, detail, listed, logs = asyncio.run(session())
        assert started.is_error, state
        text = started.content[0].text
        assert "No space left" in text or "Read-only" in text or "disk" in text, text
        assert "nothing was started" in text or "storage problem" in text, text
        assert not detail.is_error and detail.structured_content["status"] == "succeeded"
        assert [r["run_id"] for r in listed.structured_content["runs"]] == [existing.name]
        assert not logs.is_error and logs.structured_content["lines"]
    assert [p.name for p in (small_disk / "runs").iterdir()] == [existing.name]


def test_a_reward_that_hangs_or_crashes_in_check_reward_gets_a_clear_error(
    home, tmp_path, monkeypatch
):
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "3")
    monkeypatch.chdir(tmp_path)
    Path("examples").mkdir()
    Path("examples/qa.jsonl").write_text(
        '{"prompt": "why?", "reference": "because it is so"}\n' * 4
    )
    Path("hang.py").write_text("import time\ndef f(completions, **kw):\n    time.sleep(600)\n")
    Path("crash.py").write_text("import os\ndef f(completions, **kw):\n    os._exit(9)\n")

    async def session():
        async with Client(build_server(), mode="legacy") as client:
            results = {}
            for name in ("hang", "crash"):
                t = time.perf_counter()
                results[name] = (
                    await client.call_tool(
                        "check_reward", {"reward": f"{name}.py:f", "data": "examples/qa.jsonl"}
                    ),
                    time.perf_counter() - t,
                )
            results["after"] = (await client.call_tool("list_runs", {}), 0)
            return results

    results = asyncio.run(session())
    hang, hang_s = results["hang"]
    said = hang.content[0].text
    assert hang.is_error and "did not finish running the probe battery within 3 s" in said
    assert hang_s < 30
    crash, _ = results["crash"]
    assert crash.is_error and "exited with code 9" in crash.content[0].text
    assert not results["after"][0].is_error  # the server is still up


def test_listing_survives_a_run_directory_with_garbage_in_it(home):
    ctx = Context()
    good = make_run(ctx.root, "run-good-0001")
    bad = ctx.root / "run-bad-0002"
    bad.mkdir()
    (bad / "run.json").write_text("{not json")
    (bad / "events.jsonl").write_bytes(b'\xff\xfe garbage \n{"type": "stage"')
    runs = {r.run_id: r for r in list_runs(ctx=ctx)}
    assert runs[good.name].status == "succeeded"
    assert tail_logs(good.name, ctx=ctx).lines
