"""The demo's promise, checked on a real run: GRPO teaches the tiny model to rhyme."""

import statistics

import pytest

from posttrain.data.demo import DEMO_STEPS, demo_spec
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run, sample_traces
from tests.conftest import kill_leftover_runs, wait_finished

pytestmark = pytest.mark.slow


# Its run takes ~6 min alone on 2 cores; `make test` runs it beside 3 other workers, and
# under an outside load as well it took over 15 min (the trainer's one core shared).
@pytest.mark.timeout(2100)  # the 1,800 s its run may take, then it is evaluated
def test_the_demo_run_learns_to_rhyme(home):
    # One thread, as the suite gives every trainer (conftest.py); `make demo` takes both
    # cores. A second thread costs the trainer ~25% more CPU, which the other workers need.
    run_id = launch(demo_spec()).run_id
    try:
        wait_finished(run_id, 1800, every_s=2)
    finally:
        kill_leftover_runs(home)
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
