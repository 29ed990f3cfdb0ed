"""The one comparison behind every verdict (posttrain.evals.paired), against scipy and against
values worked by hand."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from posttrain.evals import paired


def test_one_replicate_each_is_the_paired_t_test():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 30)
    trained = base + rng.normal(0.1, 0.2, 30)
    est = paired.difference([trained], [base])
    t = scipy_stats.ttest_rel(trained, base)
    ci = t.confidence_interval(0.95)
    assert est.delta == pytest.approx(float(np.mean(trained - base)))
    assert est.df == pytest.approx(29)
    assert (est.low, est.high) == pytest.approx((ci.low, ci.high))
    assert est.p_value == pytest.approx(t.pvalue)
    assert est.replicate_sd == 0


def test_a_seed_that_moves_every_task_is_counted_once_in_the_replicate_part():
    # three seeds, each moving every task by -0.1, 0, +0.1, and no other noise within the arm:
    # the replicates' mean square is n x 0.01, the residual 0, so the seed variance is 0.01
    n = 40
    tasks = np.linspace(0.2, 0.8, n)
    arm = np.array([tasks + s for s in (-0.1, 0.0, 0.1)])
    spread = paired.spread(arm)
    assert spread.ms_replicate == pytest.approx(n * 0.01)
    assert spread.ms_residual == pytest.approx(0.0, abs=1e-12)
    assert spread.replicate_var == pytest.approx(0.01)
    base = np.array([tasks + 0.0])
    est = paired.difference(arm, base, spread, None)
    # the per-task differences are all 0 (the seeds cancel in their mean): all the
    # uncertainty is the seeds', 0.01 / 3 seeds
    assert est.delta == pytest.approx(0.0, abs=1e-12)
    assert est.se == pytest.approx(math.sqrt(0.01 / 3))
    assert est.replicate_sd == pytest.approx(math.sqrt(0.01 / 3))
    # one term carries the variance: Satterthwaite gives its own df, seeds - 1
    assert est.df == pytest.approx(2)


def test_satterthwaite_adds_the_two_parts_and_weights_their_degrees_of_freedom():
    rng = np.random.default_rng(5)
    n, seeds = 50, 3
    arm = rng.normal(0.5, 0.2, n)[None, :] + rng.normal(0, 0.05, (seeds, 1))
    arm = arm + rng.normal(0, 0.1, (seeds, n))
    base = rng.normal(0.4, 0.2, (1, n))
    s = paired.spread(arm)
    est = paired.difference(arm, base, s, None)
    per_task = arm.mean(axis=0) - base[0]
    a = per_task.var(ddof=1) / n
    c = 1 / (seeds * n)
    terms = [(a, n - 1), (c * s.ms_replicate, s.df_replicate), (-c * s.ms_residual, s.df_residual)]
    var = sum(v for v, _ in terms)
    assert s.replicate_var > 0
    assert est.se == pytest.approx(math.sqrt(var))
    assert est.df == pytest.approx(var**2 / sum(v * v / df for v, df in terms))
    half = scipy_stats.t.ppf(0.975, est.df) * est.se
    assert (est.low, est.high) == pytest.approx((est.delta - half, est.delta + half))


def test_pooling_adds_sums_of_squares_and_degrees_of_freedom():
    rng = np.random.default_rng(1)
    one, two = rng.normal(size=(3, 20)), rng.normal(size=(2, 20))
    a, b = paired.spread(one), paired.spread(two)
    both = paired.pooled([a, b, None])
    assert both.df_replicate == 3 and both.df_residual == 2 * 19 + 1 * 19
    assert both.ms_replicate == pytest.approx((a.ms_replicate * 2 + b.ms_replicate * 1) / 3)
    assert paired.pooled([None]) is None
    assert paired.spread(one[:1]) is None  # one replicate: no spread to measure
