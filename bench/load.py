"""Load: many MCP clients over streamable HTTP while two local runs train.

    python bench/load.py [--clients 50] [--seconds 60] [--hogs 0] [--json]

Starts `posttrain serve --http` against a fresh POSTTRAIN_HOME, launches two tiny local GRPO
runs (POSTTRAIN_LOCAL_MAX_RUNS=2, so both train at once), then runs --clients concurrent
client sessions, each calling get_run, list_runs and tail_logs in turn for --seconds.
--hogs starts that many CPU-saturating processes first (in this session, beside the server:
nothing shields it from them), killed at the end. Prints p50/p99 latency per tool, calls
made, errors and the steps the runs made meanwhile (the goals: no errors, p99 under 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

CALL_LIMIT_S = 60.0  # one tool call's longest wait before it counts as an error
# Beside CPU hogs the trainers, which run below the server (core.priority), take minutes to
# import and reach their first step.
TRAINING_WAIT_S = 600.0
SPEC = {
    "dataset": {"builtin": "rhyme-gym", "n_rows": 200, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "steps": 2000,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 24,
        "save_every": 0,
        "traces": {"every": 20, "samples": 4},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def client_loop(
    url: str,
    run_ids: list[str],
    until: float,
    seed: int,
    timings: dict[str, list[float]],
    errors: list[str],
) -> None:
    from mcp import Client

    rng = random.Random(seed)
    calls = [
        ("get_run", lambda: {"run_id": rng.choice(run_ids)}),
        ("list_runs", lambda: {"limit": 50}),
        ("tail_logs", lambda: {"run_id": rng.choice(run_ids), "tail": 50}),
    ]
    try:
        async with Client(url, mode="legacy") as client:
            i = seed
            # every tool once at least: a client whose session opened after `until` (a busy
            # machine can take seconds to answer 20 handshakes) still measures each call
            while time.time() < until or i < seed + len(calls):
                tool, args = calls[i % len(calls)]
                i += 1
                start = time.perf_counter()
                try:  # a call that never answers is an error here, not a hang
                    with anyio.fail_after(CALL_LIMIT_S):
                        result = await client.call_tool(tool, args())
                except Exception as exc:  # a failed call is the measurement here
                    errors.append(f"{tool}: {type(exc).__name__}: {exc}")
                    continue
                timings[tool].append((time.perf_counter() - start) * 1000)
                if result.is_error:
                    errors.append(f"{tool}: {result.content[0].text[:200]}")
    except Exception as exc:  # the session itself failed
        errors.append(f"session: {type(exc).__name__}: {exc}")


def run_load(clients: int, seconds: float, hogs: int = 0) -> dict:
    hog_procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        return _run_load(clients, seconds, hogs)
    finally:
        for hog in hog_procs:
            hog.kill()
            hog.wait()


def _run_load(clients: int, seconds: float, hogs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "POSTTRAIN_HOME": tmp, "POSTTRAIN_LOCAL_MAX_RUNS": "2"}
        os.environ.update(POSTTRAIN_HOME=tmp, POSTTRAIN_LOCAL_MAX_RUNS="2")
        from posttrain.tools.launch import launch
        from posttrain.tools.runs import cancel_run, get_run

        run_ids = [
            launch({**SPEC, "algorithm": {**SPEC["algorithm"], "seed": s}}).run_id for s in range(2)
        ]
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "posttrain.cli", "serve", "--http", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.time() + TRAINING_WAIT_S
            while time.time() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.2)
            while time.time() < deadline and not all(get_run(r).phase == "train" for r in run_ids):
                time.sleep(0.5)  # both runs are training before the clients arrive
            steps_before = {r: get_run(r).step for r in run_ids}
            timings: dict[str, list[float]] = {"get_run": [], "list_runs": [], "tail_logs": []}
            errors: list[str] = []
            until = time.time() + seconds

            async def main() -> None:
                await asyncio.gather(
                    *(
                        client_loop(
                            f"http://127.0.0.1:{port}/mcp", run_ids, until, i, timings, errors
                        )
                        for i in range(clients)
                    )
                )

            asyncio.run(main())
            steps = {r: get_run(r).step - steps_before[r] for r in run_ids}
        finally:
            for r in run_ids:
                cancel_run(r, grace_s=5)
            server.terminate()
            server.wait(10)
        return {
            "clients": clients,
            "seconds": seconds,
            "hogs": hogs,
            "errors": errors[:20],
            "error_count": len(errors),
            "training_steps_during_load": steps,
            "tools": {
                name: {
                    "calls": len(v),
                    "p50_ms": statistics.median(v) if v else None,
                    "p99_ms": pct(v, 0.99) if v else None,
                }
                for name, v in timings.items()
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--hogs", type=int, default=0, help="CPU-saturating processes beside")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    # Stopped with SIGTERM (a test that gave up on it), it still cancels its runs and stops
    # its server: the `finally` of run_load runs.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    result = run_load(args.clients, args.seconds, args.hogs)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['clients']} MCP clients over streamable HTTP for {result['seconds']:.0f} s "
        f"while two local runs trained beside {result['hogs']} CPU hog(s) ({os.cpu_count()} "
        f"cores; steps made meanwhile {result['training_steps_during_load']}):"
    )
    for name, t in result["tools"].items():
        if t["calls"]:
            print(
                f"  {name:10} {t['calls']:6,} calls   p50 {t['p50_ms']:7.1f} ms   p99 "
                f"{t['p99_ms']:7.1f} ms"
            )
    print(
        f"  errors: {result['error_count']}"
        + (f" (first: {result['errors'][0]})" if result["errors"] else "")
    )


if __name__ == "__main__":
    main()
