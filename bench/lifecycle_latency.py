"""How long each tool call of the lifecycle takes, as an MCP client sees it.

    python bench/lifecycle_latency.py [--mode legacy|2026-07-28] [--json]

Starts `posttrain serve` over stdio as a fresh process (as Claude starts it), in a private
POSTTRAIN_HOME, and walks the lifecycle on the demo's spec, whose reward loads the MiniLM
embedder: plan, check_dataset, check_reward (rhyme_relevance on the spec's rows), smoke_run,
get_run until it ends, tail_logs, sample_traces, list_runs, evaluate (it answers with a job),
get_job until the job ends, launch, cancel_run. Each call is timed from the client's request
to its answer. Goal (issue 23): no call over 10 s on this machine. The load average is printed:
on a busy machine the times are longer and say so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_S = 10.0


def smoke_spec() -> dict[str, Any]:
    """The demo's spec, small: its data, template and reward (rhyme_relevance, MiniLM)."""
    from posttrain.data.demo_specs import demo_spec

    spec = demo_spec(steps=4, warmstart_steps=0)
    spec["algorithm"].pop("warmstart")
    return spec


async def walk(mode: str, home: Path) -> list[tuple[str, float, str]]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "posttrain.cli", "serve"],
        env={**os.environ, "POSTTRAIN_HOME": str(home)},
        cwd=str(ROOT),
    )
    timings: list[tuple[str, float, str]] = []
    spec = smoke_spec()

    async with Client(params, mode=mode) as client:

        async def call(name: str, args: dict[str, Any], note: str = "") -> dict[str, Any]:
            t = time.perf_counter()
            result = await client.call_tool(name, args)
            took = time.perf_counter() - t
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result.content}")
            timings.append((name, took, note))
            return result.structured_content or {}

        async def until(name: str, args: dict[str, Any], done: set[str], limit_s: float):
            deadline = time.time() + limit_s
            polls = 0
            while True:
                got = await call(name, args, "poll") if polls else await call(name, args)
                polls += 1
                if got["status"] in done or time.time() > deadline:
                    return got
                await asyncio.sleep(1)

        await call("plan", {"spec": spec})
        await call("check_dataset", {"spec": spec})
        await call("check_reward", {"reward": "rhyme_relevance", "spec": spec}, "loads MiniLM")
        await call("check_reward", {"reward": "rhyme_relevance", "spec": spec}, "again")
        run_id = (await call("smoke_run", {"spec": spec}))["run_id"]
        finals = {"succeeded", "failed", "cancelled"}
        ended = await until("get_run", {"run_id": run_id}, finals, 600)
        if ended["status"] != "succeeded":
            raise RuntimeError(f"the smoke run {run_id} ended {ended['status']}: {ended['cause']}")
        await call("tail_logs", {"run_id": run_id})
        await call("sample_traces", {"run_id": run_id})
        await call("list_runs", {})
        job = await call("evaluate", {"run_id": run_id, "max_tasks": 40})
        await until("get_job", {"job_id": job["job_id"]}, finals, 600)
        launched = await call("launch", {"spec": {**spec, "name": "bench: cancelled"}})
        await call("cancel_run", {"run_id": launched["run_id"]})
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="2026-07-28", choices=("legacy", "2026-07-28"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        timings = asyncio.run(walk(args.mode, Path(tmp) / "home"))
    load = os.getloadavg()
    worst = max(timings, key=lambda t: t[1])
    if args.json:
        print(json.dumps({"mode": args.mode, "load": load, "calls": timings, "worst": worst}))
        return
    print(f"mode {args.mode}, {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f}")
    polls: dict[str, list[float]] = {}
    for name, took, note in timings:
        if note == "poll":
            polls.setdefault(name, []).append(took)
        else:
            print(f"  {name:<14} {took:7.2f} s  {note}")
    for name, times in polls.items():
        print(f"  {name:<14} {max(times):7.2f} s  slowest of {len(times)} polls")
    verdict = "within" if worst[1] <= GOAL_S else "OVER"
    print(f"slowest call: {worst[0]} {worst[1]:.2f} s ({verdict} the {GOAL_S:.0f} s goal)")


if __name__ == "__main__":
    main()
