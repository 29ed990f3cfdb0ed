"""Run groups: one spec, several seeds, one approval; evaluated together, the spread between
seeds (training noise) counted in the one interval every verdict uses. Statistics checked by
hand; a real group trained on the tiny model and evaluated through the tools."""

import math
import shutil
import statistics

import pytest

from posttrain.evals.metrics import metric_result, qualified, regressions
from posttrain.runs.context import Context
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import human_question, launch
from posttrain.tools.runs import get_run, list_runs
from tests.conftest import kill_leftover_runs, wait_finished
from tests.doubles import PaidBackendDouble
from tests.specs import EVAL_RUN, PAID


def tasks(values):
    """[task][sample] from one value per task."""
    return [[v] for v in values]


def test_three_seeds_that_agree_prove_a_gain_and_drop_the_seed_caveat():
    n = 60
    base = tasks([0.2] * n)
    passes = [tasks([0.2] * n), tasks([0.21] * n), tasks([0.19] * n)]
    trained = [tasks([0.5] * n), tasks([0.55] * n), tasks([0.6] * n)]
    m = metric_result("rhyme", passes, [base] * 3, trained)
    assert m.seed_deltas == pytest.approx([0.3, 0.35, 0.4])
    assert m.delta == pytest.approx(0.35)
    # every task moved alike: the uncertainty is the seeds' (sd 0.05) and the passes' (0.01)
    seeds, passes_var = (
        statistics.variance([0.5, 0.55, 0.6]),
        statistics.variance([0.2, 0.21, 0.19]),
    )
    assert m.seed_sd == pytest.approx(math.sqrt(seeds / 3 + passes_var / 3))
    assert m.se == pytest.approx(m.seed_sd)
    assert m.verdict == "improved"  # n >= 20, 3 seeds, not the training reward: no caveat


def test_seeds_that_disagree_are_training_noise_not_a_gain():
    n = 60
    base = tasks([0.2] * n)
    passes = [base, base, base]
    trained = [tasks([0.9] * n), tasks([0.2] * n), tasks([-0.3] * n)]  # +0.7, 0, -0.5
    m = metric_result("rhyme", passes, [base] * 3, trained)
    assert m.delta == pytest.approx(0.2 / 3)
    assert m.ci_low < 0 < m.delta  # the seeds' spread swallows the mean delta
    assert m.verdict == "within_noise"


def test_two_seeds_are_counted_by_their_spread_and_one_is_said_unmeasured():
    n = 60
    base, passes = tasks([0.2] * n), [tasks([0.2] * n), tasks([0.2] * n)]
    one = metric_result("rhyme", passes, [base], [tasks([0.5] * n)])
    close = [tasks([0.5] * n), tasks([0.51] * n)]  # deltas 0.30, 0.31: t(0.975, 1) = 12.71
    two = metric_result("rhyme", passes, [base] * 2, close)
    apart = metric_result("rhyme", passes, [base] * 2, [tasks([0.5] * n), tasks([0.6] * n)])
    assert one.verdict == "unproven: improved (one training seed)"
    assert two.verdict == "improved"  # 0.305 +- 12.71 x 0.005
    assert apart.df == pytest.approx(1) and apart.se == pytest.approx(0.05)
    assert apart.ci_high - apart.delta == pytest.approx(12.7062 * 0.05, rel=1e-4)
    assert apart.verdict == "within_noise"  # 0.35 +- 0.64


def test_reference_nll_is_better_lower_and_a_rise_qualifies_the_headline():
    n = 60
    base = tasks([2.0] * n)
    rising = metric_result(
        "reference_nll",
        [base, base],
        [base] * 3,
        [tasks([2.5] * n)] * 3,
        optimised=False,
        higher_is_better=False,
    )
    assert rising.delta == pytest.approx(0.5) and rising.verdict == "worse"
    falling = metric_result(
        "reference_nll",
        [base, base],
        [base] * 3,
        [tasks([1.5] * n)] * 3,
        optimised=False,
        higher_is_better=False,
    )
    assert falling.verdict == "improved"
    assert regressions([rising, falling]) == ["reference_nll"]
    headline = "unproven: improved (the metric is the training reward itself)"
    assert qualified(headline, ["reference_nll"]) == (
        "unproven: improved_with_regression (reference_nll worse beyond noise; the metric is "
        "the training reward itself)"
    )
    assert qualified(headline, []) == headline


def test_a_paid_group_is_approved_once_for_its_total_and_reserved_all_or_nothing(home, monkeypatch):
    backend = PaidBackendDouble()
    ctx = Context(backends={"modal": backend})
    asked = human_question(PAID, ctx=ctx, seeds=[0, 1, 2])
    assert asked.startswith("Launch a group of 3 runs of Qwen3-0.6B") and "$7.56" in asked
    needs = launch(PAID, ctx=ctx, seeds=[0, 1, 2])
    assert needs.status == "needs_confirmation" and needs.cost.worst_case_usd == 7.56  # 3 x $2.52
    started = launch(PAID, needs.confirmation_token, ctx=ctx, seeds=[0, 1, 2])
    assert started.status == "started" and len(started.run_ids) == 3
    assert started.group_id.startswith("grp-") and backend.started == started.run_ids
    again = launch(PAID, ctx=ctx, seeds=[0, 1, 2])
    assert again.status == "existing" and again.run_ids == started.run_ids
    listed = {r.run_id: r for r in list_runs(ctx=ctx)}
    assert [listed[r].seed for r in started.run_ids] == [0, 1, 2]
    assert {listed[r].group_id for r in started.run_ids} == {started.group_id}

    monkeypatch.setenv("POSTTRAIN_MAX_DAY_USD", "12")  # room for one more run, not three
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "8")
    from posttrain.core.errors import BudgetError

    with pytest.raises(BudgetError, match="daily cap"):
        launch(PAID, ctx=ctx, seeds=[3, 4, 5])
    assert len(backend.started) == 3  # none of the second group started


GROUP = {  # smaller than EVAL_RUN: three of them train in the test
    **EVAL_RUN,
    "dataset": {**EVAL_RUN["dataset"], "n_rows": 320},
    "algorithm": {
        **EVAL_RUN["algorithm"],
        "batch_size": 8,
        "max_completion_length": 16,
        "warmstart": {"steps": 10, "learning_rate": 2e-3, "batch_size": 16},
    },
}


@pytest.mark.slow
def test_a_local_group_queues_trains_and_is_evaluated_across_its_seeds(home):
    started = launch(GROUP, seeds=[0, 1, 2])
    try:
        details = [wait_finished(r, 400) for r in started.run_ids]
    finally:
        kill_leftover_runs(home)
    assert [d.status for d in details] == ["succeeded"] * 3
    assert [get_run(r).seed for r in started.run_ids] == [0, 1, 2]
    starts = sorted((d.started_at, d.run_id) for d in details)
    assert [r for _, r in starts] == started.run_ids  # queued, in seed order

    # the "trained" models are their bases exactly: whatever the seeds, no gain
    for run_id in started.run_ids:
        run_dir = home / "runs" / run_id
        shutil.rmtree(run_dir / "final")
        shutil.copytree(run_dir / "warmstart", run_dir / "final")
    outcome = evaluate(started.group_id, k=2, base_passes=3, max_tasks=60)
    result = outcome.result
    assert result.run_id == started.group_id and result.runs == started.run_ids
    assert result.training_seeds == 3 and result.tasks_used >= 50
    reward = result.metrics[0]
    assert reward.seeds == 3 and reward.delta == 0.0 and reward.seed_deltas == [0.0] * 3
    assert result.verdict == "unproven: within_noise (the metric is the training reward itself)"
    assert "training seed" not in result.verdict  # three seeds: no seed caveat
    nll = next(m for m in result.unoptimised if m.name == "reference_nll")
    assert nll.delta == 0.0 and "within_noise" in nll.verdict
    assert get_run(started.run_ids[1]).evaluation["verdict"] == result.verdict


def test_a_regression_is_named_by_the_same_rule_for_one_run_and_for_a_group():
    n, base = 60, tasks([2.0] * 60)
    one_run = metric_result(
        "reference_nll",
        [base, base],
        [base],
        [tasks([2.5] * n)],
        optimised=False,
        higher_is_better=False,
    )
    # three seeds that all got worse on every task, by amounts far apart (0.1, 0.9, 0.5): one
    # rule for every verdict, so their spread (0.5 +- 0.99) keeps the rise unproven, in the
    # metric's verdict and in the headline alike; seeds that agree (0.4, 0.5, 0.6) prove it
    apart = metric_result(
        "reference_nll",
        [base, base],
        [base] * 3,
        [tasks([2.1] * n), tasks([2.9] * n), tasks([2.5] * n)],
        optimised=False,
        higher_is_better=False,
    )
    group = metric_result(
        "reference_nll",
        [base, base],
        [base] * 3,
        [tasks([2.4] * n), tasks([2.5] * n), tasks([2.6] * n)],
        optimised=False,
        higher_is_better=False,
    )
    assert apart.verdict == "within_noise" and apart.ci_low < 0 < apart.delta
    assert regressions([apart]) == []
    assert group.verdict == "worse"
    assert regressions([one_run]) == regressions([group]) == ["reference_nll"]
    headline = "unproven: improved (the metric is the training reward itself)"
    assert qualified(headline, regressions([group])) == qualified(headline, ["reference_nll"])
    assert qualified("unproven: within_noise (n=12 tasks < 20)", ["reference_nll"]) == (
        "unproven: within_noise (reference_nll worse beyond noise; n=12 tasks < 20)"
    )
    assert qualified("insufficient_data", ["reference_nll"]) == "insufficient_data"
