"""Load: 50 MCP clients over streamable HTTP while two local runs train, with no errors.
(bench/load.py runs the same for 60 s and prints the latency figures.)"""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# Beside 3 busy xdist workers the bench hung past 540 s (2 of 4 suite runs), and beside 3 CPU
# hogs past 400 s, while alone it takes ~25 s: see issue 20's note. It runs alone.
pytestmark = [pytest.mark.slow, pytest.mark.alone]
BENCH = ROOT / "bench" / "load.py"


def test_fifty_clients_get_answers_without_errors_while_two_runs_train():
    bench = subprocess.Popen(
        [sys.executable, str(BENCH), "--clients", "50", "--seconds", "10", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # its trainers must start training first: slow beside a busy suite
        stdout, stderr = bench.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        bench.terminate()  # SIGTERM: the bench cancels its runs and stops its server
        stdout, stderr = bench.communicate(timeout=60)
        pytest.fail(f"bench/load.py took over 540 s: {stderr[-2000:]}")
    assert bench.returncode == 0, stderr[-2000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["error_count"] == 0, result["errors"]
    assert all(t["calls"] > 0 for t in result["tools"].values())
    assert all(step > 0 for step in result["training_steps_during_load"].values())
