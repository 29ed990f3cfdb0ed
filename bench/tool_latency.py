"""Tool latency through the real MCP server and in-memory client, on a large index.

    python bench/tool_latency.py [--runs 1000] [--lines 1000] [--calls 300]

Builds --runs finished run directories with --lines log lines each (1,000 x 1,000 = one
million lines) and 100 metric steps each, ingests them into the SQLite index, then times
get_run, list_runs, tail_logs and a log search as an agent calls them.
Goals (issue 4): p99 <= 20 ms for get_run, <= 100 ms for a search.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

WORDS = (
    "loss reward step gradient warmup checkpoint saved token batch sampler rhyme "
    "relevance cuda memory queue worker epoch adapter"
).split()


def build(root: Path, runs: int, lines: int, steps: int = 100) -> list[str]:
    rng = random.Random(0)
    ids = []
    spec = json.dumps(
        {
            "model": {"name": "tiny-local"},
            "reward": {"name": "rhyme"},
            "algorithm": {"kind": "grpo", "steps": steps, "max_completion_length": 40},
        }
    )
    for r in range(runs):
        run_id = f"run-bench-{r:05d}"
        d = root / run_id
        d.mkdir(parents=True)
        (d / "spec.json").write_text(spec)
        (d / "run.json").write_text(
            json.dumps(
                {"run_id": run_id, "backend": "local", "created_at": 1.7e9 + r, "spec_id": "bench"}
            )
        )
        out = [json.dumps({"t": 1.7e9 + r, "type": "stage", "stage": "training"})]
        for i in range(lines):
            message = " ".join(rng.choice(WORDS) for _ in range(8)) + f" line {i}"
            out.append(
                json.dumps({"t": 1.7e9 + r + i, "type": "log", "level": "info", "message": message})
            )
            if i % (lines // steps or 1) == 0 and i // (lines // steps or 1) < steps:
                step = i // (lines // steps or 1) + 1
                out.append(
                    json.dumps(
                        {
                            "t": 1.7e9 + r + i,
                            "type": "metrics",
                            "phase": "train",
                            "step": step,
                            "reward": rng.random(),
                            "completion_length": 30 + rng.random(),
                        }
                    )
                )
        out.append(
            json.dumps(
                {"t": 1.7e9 + r + lines, "type": "result", "status": "succeeded", "final": {}}
            )
        )
        (d / "events.jsonl").write_text("\n".join(out) + "\n")
        ids.append(run_id)
    return ids


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(ids: list[str], calls: int) -> dict[str, list[float]]:
    from mcp import Client

    from posttrain.server.app import build_server

    rng = random.Random(1)
    timings: dict[str, list[float]] = {}
    async with Client(build_server(), mode="legacy") as client:
        cases = {
            "get_run": lambda: ("get_run", {"run_id": rng.choice(ids)}),
            "list_runs": lambda: ("list_runs", {"limit": 50}),
            "tail_logs": lambda: ("tail_logs", {"run_id": rng.choice(ids), "tail": 50}),
            "log search": lambda: (
                "tail_logs",
                {"run_id": rng.choice(ids), "search": rng.choice(WORDS), "tail": 50},
            ),
        }
        for name, make in cases.items():
            for _ in range(5):  # warm-up: first-call imports and caches are not latency
                await client.call_tool(*make())
            samples = []
            for _ in range(calls):
                tool, args = make()
                t = time.perf_counter()
                result = await client.call_tool(tool, args)
                samples.append((time.perf_counter() - t) * 1000)
                assert not result.is_error, result.content
            timings[name] = samples
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POSTTRAIN_HOME"] = tmp
        t = time.perf_counter()
        ids = build(Path(tmp) / "runs", args.runs, args.lines)
        built = time.perf_counter() - t
        from posttrain.runs.store import Store

        t = time.perf_counter()
        Store().sync()
        ingested = time.perf_counter() - t
        print(
            f"{args.runs:,} runs, {args.runs * args.lines:,} log lines: written in "
            f"{built:.0f} s, indexed in {ingested:.0f} s "
            f"({args.runs * args.lines / ingested:,.0f} lines/s)"
        )
        timings = asyncio.run(measure(ids, args.calls))
    goals = {"get_run": 20, "log search": 100}
    print(f"latency over {args.calls} calls each (in-memory MCP client, {os.cpu_count()} cores):")
    for name, samples in timings.items():
        goal = f"  (goal p99 <= {goals[name]} ms)" if name in goals else ""
        print(
            f"  {name:12} p50 {statistics.median(samples):6.1f} ms   p99 "
            f"{pct(samples, 0.99):6.1f} ms{goal}"
        )


if __name__ == "__main__":
    main()
