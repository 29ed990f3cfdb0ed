"""The real MCP server through the real mcp.Client: in memory, over stdio, over HTTP, in both
protocol eras, driving the lifecycle on the tiny local model."""

import asyncio
import fcntl
import os
import subprocess
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from posttrain.server.app import build_server
from tests.conftest import ROOT, free_port, kill_leftover_runs, mcp_wait_finished, wait_listening
from tests.specs import SMOKE_SPEC

pytestmark = pytest.mark.slow

MODES = ("legacy", "2026-07-28")
VERBS = {
    "compare_scores",
    "plan",
    "check_dataset",
    "check_reward",
    "check_environment",
    "smoke_run",
    "launch",
    "list_runs",
    "get_run",
    "tail_logs",
    "sample_traces",
    "evaluate",
    "cancel_run",
    "export_run",
    "get_job",
    "cancel_job",
}


class Heard:
    """A progress callback that keeps the messages, and lets a test wait for the first."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._any = anyio.Event()

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        self._any.set()

    async def first(self, timeout_s: float = 10.0) -> list[str]:
        """The messages once one has arrived: the server sends its notifications before the
        result, but the client runs each callback in a task of its own, which may run after
        call_tool has returned."""
        with anyio.move_on_after(timeout_s):
            await self._any.wait()
        assert self.messages, f"no progress notification within {timeout_s} s"
        return self.messages


async def lifecycle(client: Client, seed: int) -> dict:
    """The agent's path: list, plan, check the reward, smoke, poll, read logs and traces."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == VERBS
    assert tools["get_run"].annotations.read_only_hint is True
    assert tools["launch"].annotations.destructive_hint is True
    assert tools["launch"].annotations.open_world_hint is True
    assert tools["cancel_run"].annotations.destructive_hint is True
    assert all(t.output_schema for t in tools.values())
    spec = {**SMOKE_SPEC, "algorithm": {**SMOKE_SPEC["algorithm"], "seed": seed}}

    planned = await client.call_tool("plan", {"spec": spec})
    assert not planned.is_error and planned.structured_content["cost"]["worst_case_usd"] == 0
    reward = await client.call_tool(
        "check_reward",
        {"reward": "rhyme", "data": "examples/rhyme_qa.jsonl", "honest_column": "verse", "rows": 6},
    )
    assert not reward.is_error and "one_word_lines" not in reward.structured_content["flagged"]

    heard = Heard()
    smoke = await client.call_tool("smoke_run", {"spec": spec}, progress_callback=heard)
    assert not smoke.is_error, smoke.content
    run_id = smoke.structured_content["run_id"]
    messages = await heard.first()
    assert all(m.startswith(f"{run_id}: ") for m in messages)  # stage by stage
    assert smoke.structured_content["approved_by"] == "free"
    got = await mcp_wait_finished(client, run_id, 180)
    assert got["status"] == "succeeded", got["cause"]
    assert got["step"] == 5 and got["total_steps"] == 5

    logs = (await client.call_tool("tail_logs", {"run_id": run_id, "tail": 5})).structured_content
    assert logs["lines"][-1]["message"] == "run succeeded"
    traces = (await client.call_tool("sample_traces", {"run_id": run_id})).structured_content
    assert set(traces["steps"]) == {"1", "5"} and len(traces["steps"]["5"]) == 3
    listed = (await client.call_tool("list_runs", {})).structured_content["runs"]
    assert run_id in {r["run_id"] for r in listed}
    resource = await client.read_resource(f"posttrain://runs/{run_id}")
    assert '"metrics"' in resource.contents[0].text
    return got


@pytest.fixture
def served_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(ROOT)
    yield home
    kill_leftover_runs(home)


@pytest.mark.parametrize("mode", MODES)
def test_in_memory_client_drives_the_lifecycle(served_home, mode):
    async def main():
        async with Client(build_server(), mode=mode) as client:
            await lifecycle(client, seed=1)

    asyncio.run(main())


def test_a_smoke_run_still_queued_reports_progress(served_home, monkeypatch):
    """A run that has no stage yet (queued behind another, or its trainer still importing)
    is reported too: the client hears "queued" instead of nothing."""
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "1")
    (served_home / "slots").mkdir(parents=True)
    with (served_home / "slots" / "slot-0.lock").open("ab") as slot:
        fcntl.flock(slot, fcntl.LOCK_EX)  # another trainer holds the machine's only slot

        async def main():
            async with Client(build_server(), mode="legacy") as client:
                heard = Heard()
                smoke = await client.call_tool(
                    "smoke_run", {"spec": SMOKE_SPEC}, progress_callback=heard
                )
                assert not smoke.is_error, smoke.content
                run_id = smoke.structured_content["run_id"]
                assert await heard.first() == [f"{run_id}: queued"]
                cancelled = await client.call_tool("cancel_run", {"run_id": run_id})
                assert cancelled.structured_content["status"] == "cancelled"

        asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_stdio_client_drives_the_lifecycle(served_home, mode):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "posttrain.cli", "serve"],
        env={**os.environ, "POSTTRAIN_HOME": str(served_home)},
        cwd=os.getcwd(),
    )

    async def main():
        async with Client(params, mode=mode) as client:
            await lifecycle(client, seed=2)

    asyncio.run(main())


@pytest.fixture
def http_server(served_home):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", "serve", "--http", "--port", str(port)],
        env={**os.environ, "POSTTRAIN_HOME": str(served_home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_listening(port)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("mode", MODES)
def test_http_client_drives_the_lifecycle(http_server, mode):
    async def main():
        async with Client(http_server, mode=mode) as client:
            await lifecycle(client, seed=3)

    asyncio.run(main())
