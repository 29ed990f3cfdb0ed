"""Progress on any call over a second: a tool call that works for seconds beats each second,
in both protocol eras, so a client that shows progress (and Claude Code's idle watchdog) hears
that it lives."""

import asyncio
import json

import anyio
import pytest
from mcp import Client

from posttrain.server.app import build_server

MODES = ("legacy", "2026-07-28")
SLOW_REWARD = """
import time

def score(completions, **columns):
    time.sleep(0.2)  # the workload: a reward that takes its time
    return [0.5 for _ in completions]
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_call_of_seconds_sends_a_progress_beat_each_second(home, tmp_path, mode):
    (tmp_path / "slow.py").write_text(SLOW_REWARD)
    rows = [{"prompt": f"q{i}", "reference": f"answer {i}"} for i in range(4)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    heard: list[tuple[float, str | None]] = []
    first = anyio.Event()

    async def on_progress(done, total, message):
        heard.append((done, message))
        first.set()

    async def go():
        async with Client(build_server(roots=[tmp_path]), mode=mode) as client:
            result = await client.call_tool(
                "check_reward",
                {
                    "reward": str(tmp_path / "slow.py") + ":score",
                    "data": str(tmp_path / "data.jsonl"),
                    "rows": 4,
                },
                progress_callback=on_progress,
            )
            with anyio.move_on_after(10):  # callbacks run in tasks of their own: wait, bounded
                await first.wait()
            return result

    result = asyncio.run(go())
    assert not result.is_error, result.content
    assert heard and heard[0] == (1.0, "check_reward: working, 1 s")
    beats = [done for done, _ in heard]
    assert beats == sorted(beats)  # progress only rises
