"""`posttrain demo` as an agent's shell runs it, stdout piped: it says how it goes at least
every 15 s from start to end, and its run keeps the demo's promise (GRPO teaches the tiny
model to rhyme). One run serves both: the demo is the suite's longest test."""

import itertools
import re
import statistics
import subprocess
import sys
import time

import pytest

from posttrain.data.demo_specs import DEMO_STEPS
from posttrain.tools.evaluate import evaluate
from posttrain.tools.runs import get_run, sample_traces
from tests.conftest import ROOT, kill_leftover_runs

pytestmark = pytest.mark.slow

PROMISED_GAP_S = 15  # issue 40: an agent that sees nothing for longer assumes a hang


# Its run takes ~6 min alone on 2 cores; `make test` runs it beside 3 other workers, and
# under an outside load as well it took over 15 min (the trainer's one core shared).
@pytest.mark.timeout(2100)  # the 1,800 s its run may take, then it is evaluated
def test_the_demo_in_a_pipe_writes_a_line_every_15_s_and_its_run_learns_to_rhyme(home, tmp_path):
    # One thread, as the suite gives every trainer (conftest.py's POSTTRAIN_CPU_THREADS, which
    # the child inherits); `make demo` takes both cores.
    arrived: list[tuple[float, str]] = []
    started = time.monotonic()
    with (tmp_path / "stderr").open("w") as stderr:
        demo = subprocess.Popen(
            [sys.executable, "-m", "posttrain.cli", "demo"],
            stdout=subprocess.PIPE,  # no terminal: what Claude Code's shell gives a command
            stderr=stderr,
            text=True,
            cwd=ROOT,
        )
        try:
            for line in demo.stdout:
                arrived.append((time.monotonic(), line.rstrip("\n")))
            assert demo.wait(timeout=60) == 0, (tmp_path / "stderr").read_text()[-2000:]
        finally:
            demo.kill()
            kill_leftover_runs(home)
    ended = time.monotonic()

    times = [started, *(t for t, _ in arrived), ended]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    after = arrived[worst - 1][1] if worst else "(the start)"
    assert gaps[worst] <= PROMISED_GAP_S, f"{gaps[worst]:.1f} s of silence after {after!r}"
    text = "\n".join(line for _, line in arrived)
    assert re.search(r"GRPO \d+/\d+ reward", text) and "SFT warm-start" in text
    run_id = re.search(r"demo run (run-[\w-]+)", text).group(1)
    assert f"\n  posttrain run logs {run_id}" in text  # its next commands, one a line
    assert " | posttrain" not in text  # not joined as if they were a pipeline

    detail = get_run(run_id, verbose=True)
    assert detail.status == "succeeded", detail.cause
    rhyme = [m["components"]["rhyme"] for m in detail.metrics]
    assert len(rhyme) == DEMO_STEPS
    first, last = statistics.fmean(rhyme[:10]), statistics.fmean(rhyme[-10:])
    # Measured on an AMD EPYC: first 10 steps 0.03-0.05, last 10 steps 0.58-0.66 (seeds 0-3).
    assert last > first + 0.15, f"rhyme first 10 steps {first:.3f}, last 10 {last:.3f}"
    late = sample_traces(run_id, "last", n=8, order="best").steps[DEMO_STEPS]
    assert max(r.components["rhyme"] for r in late) > 0.5  # real verse that rhymes

    # base = the SFT warm-start, on held-out prompts. 100 tasks at k=2, not the default 200
    # at k=4: the rise is 0.03 -> ~0.6, and the full size cost ~25 CPU-s more of the suite.
    result = evaluate(run_id, k=2, max_tasks=100).result
    metrics = {m.name: m for m in result.metrics}
    assert result.tasks_used >= 50
    assert metrics["rhyme_rate"].verdict == "unproven: improved (one training seed)"
    assert metrics["reward"].ci_low > 0 and "training reward itself" in result.verdict
    assert get_run(run_id).evaluation["verdict"] == result.verdict
