"""One key is one run, across processes, on a loaded machine; no run is failed while it lives.

    python bench/launch_race.py [--rounds 20] [--launchers 4] [--mode cli|mcp|both] [--no-hog]

Each round launches one small local run (the tiny model, 2 GRPO steps) from `--launchers`
processes at once with one idempotency key per round, while `posttrain run list` readers
poll and a CPU hog spins beside them (the shape of issue 19's report: 4 CLI launches at once
on a busy 2-core machine). `--mode mcp` does the same through that many concurrent MCP
clients, each a `posttrain serve` over stdio. Rounds follow each other without waiting, so
runs queue behind the local slot while later rounds launch and read. At the end it waits for
every run to finish and prints, as JSON: runs started, runs per key, what each launcher was
told, and the final statuses (every run must have succeeded: none failed while it lived).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = {
    "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "steps": 2,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 16,
        "save_every": 0,
        "traces": {"every": 0, "samples": 2},
    },
}
HOG = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"


def cli(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", *args, "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def answer(proc: subprocess.Popen, timeout_s: float = 600) -> dict | list:
    out, err = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {err[-1500:]}")
    return json.loads(out)


def cli_rounds(env: dict[str, str], spec: Path, rounds: int, launchers: int) -> list[list]:
    told = []
    for i in range(rounds):
        key = f"cli-round-{i}"
        procs = [cli(env, "launch", str(spec), "--idempotency-key", key) for _ in range(launchers)]
        readers = [cli(env, "run", "list") for _ in range(2)]
        told.append([(key, r["status"], r["run_id"]) for r in map(answer, procs)])
        for reader in readers:
            answer(reader)
    return told


async def mcp_rounds(env: dict[str, str], rounds: int, launchers: int) -> list[list]:
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "posttrain.cli", "serve"], env=env, cwd=str(ROOT)
    )
    told = []
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(Client(params, mode="legacy")) for _ in range(launchers)
        ]
        for i in range(rounds):
            key = f"mcp-round-{i}"
            calls = [c.call_tool("launch", {"spec": SPEC, "idempotency_key": key}) for c in clients]
            reads = [clients[0].call_tool("list_runs", {})]
            results = await asyncio.gather(*calls, *reads)
            for r in results:
                if r.is_error:
                    raise RuntimeError(str(r.content)[:1500])
            told.append(
                [
                    (key, r.structured_content["status"], r.structured_content["run_id"])
                    for r in results[:launchers]
                ]
            )
    return told


def wait_all_final(env: dict[str, str], expected: int, timeout_s: float) -> list[dict]:
    deadline = time.time() + timeout_s
    while True:
        runs = answer(cli(env, "run", "list", "--limit", "1000"))
        final = [r for r in runs if r["status"] in ("succeeded", "failed", "cancelled")]
        if len(final) >= expected and len(final) == len(runs):
            return runs
        if time.time() > deadline:
            return runs
        time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--launchers", type=int, default=4)
    parser.add_argument("--mode", choices=["cli", "mcp", "both"], default="both")
    parser.add_argument("--no-hog", action="store_true")
    parser.add_argument("--home", help="POSTTRAIN_HOME to use (default: a new temporary one)")
    args = parser.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="posttrain-race-"))
    env = {**os.environ, "POSTTRAIN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    spec = home / "spec.json"
    home.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps(SPEC))
    hog = None if args.no_hog else subprocess.Popen([sys.executable, "-c", HOG])
    started = time.time()
    told: list[list] = []
    try:
        if args.mode in ("cli", "both"):
            told += cli_rounds(env, spec, args.rounds, args.launchers)
        if args.mode in ("mcp", "both"):
            told += asyncio.run(mcp_rounds(env, args.rounds, args.launchers))
        launched_s = time.time() - started
        runs = wait_all_final(env, len(told), timeout_s=60 * len(told) + 300)
    finally:
        if hog is not None:
            hog.kill()
    with sqlite3.connect(home / "budget.sqlite") as db:
        keys = dict(db.execute("SELECT idempotency_key, run_id FROM launches"))
    folders = sorted(p.name for p in (home / "runs").iterdir() if (p / "run.json").is_file())
    per_round = [
        {
            "key": r[0][0],
            "told": sorted(s for _, s, _ in r),
            "runs": sorted({run for _, _, run in r}),
        }
        for r in told
    ]
    statuses = {r["run_id"]: r["status"] for r in runs}
    causes = {r["run_id"]: r.get("cause") for r in runs if r["status"] != "succeeded"}
    report = {
        "rounds": len(told),
        "launchers_per_round": args.launchers,
        "hog": not args.no_hog,
        "run_folders": len(folders),
        "rounds_with_one_run": sum(len(r["runs"]) == 1 for r in per_round),
        "rounds_told_one_started": sum(r["told"].count("started") == 1 for r in per_round),
        "keys_held_by_their_run": sum(
            keys.get(r["key"]) == r["runs"][0] for r in per_round if len(r["runs"]) == 1
        ),
        "statuses": {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))},
        "not_succeeded": causes,
        "launch_phase_s": round(launched_s, 1),
        "total_s": round(time.time() - started, 1),
        "home": str(home),
    }
    print(json.dumps(report, indent=2))
    ok = (
        report["run_folders"] == len(told) == report["rounds_with_one_run"]
        and report["rounds_told_one_started"] == len(told)
        and report["keys_held_by_their_run"] == len(told)
        and report["statuses"] == {"succeeded": len(told)}
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
