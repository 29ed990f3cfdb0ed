"""Server start-up: how soon `posttrain serve` answers an MCP client, and how much memory it takes.

    python bench/startup.py [--starts 5] [--json]

Each start runs `posttrain serve` (stdio) as a fresh process, writes an MCP `initialize` at
once (the server reads it when it is ready), and times the answer from the moment the process
was spawned; then `tools/list`, as every client asks next. Peak RSS is the server's own VmHWM
from /proc after tools/list; the CPU seconds it spent up to the initialize answer tell what an
idle machine would show when this one is busy. It also times `posttrain serve --http --host
0.0.0.0` without a token, which must refuse. MCP clients start the server at every session
and give up on a slow one. Goals (issue 19): initialize within 1.5 s on an idle 2-core
machine, at most 150 MB resident; the refusal within 2 s. The load average is printed: on a
busy machine the times are longer and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-startup", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ANSWER_TIMEOUT_S = 120.0


def posttrain_command() -> list[str]:
    """The installed `posttrain` script beside this interpreter, as a client would start it."""
    script = Path(sys.executable).parent / "posttrain"
    if script.exists():
        return [str(script)]
    found = shutil.which("posttrain")
    return [found] if found else [sys.executable, "-m", "posttrain.cli"]


def peak_rss_mb(pid: int) -> float:
    """The process's high-water resident set (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used: on a busy machine this, unlike the
    wall time, is close to what an idle one would show."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_answer(proc: subprocess.Popen, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response with this id; notifications and log lines before it are skipped."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout (exit {proc.poll()})")
        message = json.loads(line)
        if message.get("id") == request_id:
            if "error" in message:
                raise RuntimeError(f"error answer: {message['error']}")
            return message


def one_start(home: Path) -> dict[str, float]:
    """Spawn the stdio server; seconds to the initialize and tools/list answers; peak RSS."""
    env = {**os.environ, "POSTTRAIN_HOME": str(home)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*posttrain_command(), "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=home,
        text=True,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        answer = read_answer(proc, 1)
        initialize_s = time.perf_counter() - started
        initialize_cpu_s = cpu_s(proc.pid)
        assert "serverInfo" in answer["result"], answer
        proc.stdin.write(json.dumps(INITIALIZED) + "\n" + json.dumps(TOOLS_LIST) + "\n")
        proc.stdin.flush()
        tools = read_answer(proc, 2)["result"]["tools"]
        tools_s = time.perf_counter() - started
        rss_mb = peak_rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    return {
        "initialize_s": initialize_s,
        "initialize_cpu_s": initialize_cpu_s,
        "tools_list_s": tools_s,
        "peak_rss_mb": rss_mb,
        "tools": len(tools),
    }


def one_refusal(home: Path) -> dict[str, Any]:
    """`serve --http` on a public address without a token: seconds to the refusal, exit code."""
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_SERVER_TOKEN"}
    started = time.perf_counter()
    out = subprocess.run(
        [*posttrain_command(), "serve", "--http", "--host", "0.0.0.0"],
        env={**env, "POSTTRAIN_HOME": str(home)},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=ANSWER_TIMEOUT_S,
    )
    return {
        "refusal_s": time.perf_counter() - started,
        "exit_code": out.returncode,
        "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "",
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="Fresh server starts to time.")
    parser.add_argument("--json", action="store_true", help="One JSON line at the end.")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="posttrain-startup-") as tmp:
        home = Path(tmp)
        starts = [one_start(home) for _ in range(args.starts)]
        refusals = [one_refusal(home) for _ in range(args.starts)]
    result = {
        "command": " ".join([*posttrain_command(), "serve"]),
        "starts": args.starts,
        "cpus": os.cpu_count(),
        "load_avg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "initialize_s": summary([s["initialize_s"] for s in starts]),
        "initialize_cpu_s": summary([s["initialize_cpu_s"] for s in starts]),
        "tools_list_s": summary([s["tools_list_s"] for s in starts]),
        "peak_rss_mb": summary([s["peak_rss_mb"] for s in starts]),
        "tools": starts[0]["tools"],
        "refusal_s": summary([r["refusal_s"] for r in refusals]),
        "refusal_exit_codes": sorted({r["exit_code"] for r in refusals}),
        "refusal_error": refusals[0]["error"],
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['command']}: {args.starts} fresh starts on {result['cpus']} CPUs, load "
        f"average (1 min) {result['load_avg_1m_before_after'][0]} before, "
        f"{result['load_avg_1m_before_after'][1]} after"
    )
    figures_units = (
        ("initialize_s", "s"),
        ("initialize_cpu_s", "s"),
        ("tools_list_s", "s"),
        ("peak_rss_mb", "MB"),
    )
    for name, unit in figures_units:
        figures = result[name]
        print(f"  {name:16s} median {figures['median']:7.2f} {unit}   max {figures['max']:7.2f}")
    r = result["refusal_s"]
    print(
        f"  serve --http --host 0.0.0.0 without a token: refused in median {r['median']:.2f} s, "
        f"max {r['max']:.2f} s, exit {result['refusal_exit_codes']}"
    )
    print(f"    {result['refusal_error'][:160]}")
    print("Goals: initialize <= 1.5 s and <= 150 MB on an idle 2-core machine; refusal <= 2 s.")


if __name__ == "__main__":
    main()
