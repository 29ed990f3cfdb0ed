"""Load: the HTTP server answers status calls within 2 s while CPU-saturating processes and a
local run share the machine (bench/load.py gives the figures with 20 clients and two runs).

It runs in the suite: beside its three hogs it also has the suite's other workers, which is
the point (a training server runs beside CPU-heavy work). The hogs live only while it
measures, and are always killed."""

import asyncio
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import anyio
import pytest

from posttrain.tools.launch import launch
from posttrain.tools.runs import cancel_run
from tests.conftest import ROOT, free_port, wait_listening
from tests.specs import tiny

pytestmark = pytest.mark.slow

ANSWER_S = 2.0  # the bound on one status call
CALLS = 50
HOGS = 3
GIVE_UP_S = 10.0  # a call this slow has failed already: the test ends instead of waiting


@contextmanager
def cpu_hogs(n: int):
    """n processes that each saturate a core, in this session (the server's): nothing shields
    the server from them."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@contextmanager
def http_server(home):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", "serve", "--http", "--port", str(port)],
        env={**os.environ, "POSTTRAIN_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, timeout_s=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def sequential_get_runs(url: str, run_id: str, hogs: int) -> list[float]:
    """Seconds each get_run took, one after the other, beside `hogs` CPU hogs; stops at the
    first over ANSWER_S.

    One call is made before the hogs start and is not timed: the client's first call imports
    jsonschema and builds the validator of get_run's output schema (0.2 s of this process's
    CPU, measured with cProfile), which is the test's client warming up, not the server
    answering; beside the hogs and the suite's workers that alone read 2.5 s in CI."""
    from mcp import Client

    took = []
    async with Client(url, mode="legacy") as client:
        assert not (await client.call_tool("get_run", {"run_id": run_id})).is_error
        with cpu_hogs(hogs):
            for _ in range(CALLS):
                took.append(await timed_get_run(client, run_id))
                if took[-1] > ANSWER_S:
                    break
    return took


async def timed_get_run(client, run_id: str) -> float:
    start = time.perf_counter()
    with anyio.fail_after(GIVE_UP_S):
        result = await client.call_tool("get_run", {"run_id": run_id})
    assert not result.is_error, result.content[0].text
    return time.perf_counter() - start


def test_fifty_get_runs_each_answer_within_two_seconds_beside_cpu_hogs_and_a_run(home):
    run_id = launch(tiny(steps=5000)).run_id  # its trainer runs below the server
    try:
        with http_server(home) as url:
            took = asyncio.run(sequential_get_runs(url, run_id, HOGS))
            sys.path.insert(0, str(ROOT / "bench"))
            from load import client_loop  # bench/load.py's clients, for a few seconds

            timings = {"get_run": [], "list_runs": [], "tail_logs": []}
            errors: list[str] = []

            async def twenty() -> None:
                until = time.time() + 5
                await asyncio.gather(
                    *(client_loop(url, [run_id], until, i, timings, errors) for i in range(20))
                )

            with cpu_hogs(HOGS):
                asyncio.run(twenty())
    finally:
        cancel_run(run_id, grace_s=5)
    slow = [f"call {i + 1}: {s:.2f} s" for i, s in enumerate(took) if s > ANSWER_S]
    assert not slow, f"beside {HOGS} CPU hogs, get_run took over {ANSWER_S} s: {slow}"
    assert len(took) == CALLS
    # 20 clients at once beside them: every call answered, none failed
    assert errors == [], errors[:5]
    assert all(timings.values()), {k: len(v) for k, v in timings.items()}
