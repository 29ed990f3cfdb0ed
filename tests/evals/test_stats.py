"""The evaluation statistics, against values computed by hand or by scipy."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from posttrain.evals import stats
from posttrain.evals.decontam import decontaminate


def test_the_noise_floor_uses_the_t_quantile_with_passes_minus_one_df():
    floor = stats.noise_floor([0.1, 0.2, 0.3])
    assert floor.df == 2
    assert floor.t == pytest.approx(4.302652729911275)  # t(0.975, 2), from tables
    assert floor.run_std == pytest.approx(0.1)
    assert floor.value == pytest.approx(4.302652729911275 * 0.1 * math.sqrt(2))
    assert "4.303 x 0.1000 x 1.414 = 0.6085" in floor.formula
    assert stats.noise_floor([0.5, 0.7]).t == pytest.approx(scipy_stats.t.ppf(0.975, 1))


def test_the_bootstrap_is_the_percentile_interval_of_resampled_means_on_a_fixed_seed():
    deltas = [0.3, -0.1, 0.2, 0.5, 0.0, 0.4, 0.1, -0.2, 0.6, 0.25]
    rng = np.random.default_rng(7)
    means = []
    for _ in range(2000):  # the definition, written out
        picks = rng.integers(0, len(deltas), len(deltas))
        means.append(sum(deltas[i] for i in picks) / len(deltas))
    expected = (np.percentile(means, 2.5), np.percentile(means, 97.5))
    assert stats.bootstrap_ci(deltas, seed=7) == pytest.approx(expected)
    assert stats.bootstrap_ci(deltas, seed=7) == stats.bootstrap_ci(deltas, seed=7)
    low, high = stats.bootstrap_ci(deltas, seed=7)
    assert low < np.mean(deltas) < high


def test_the_sign_flip_test_is_exact_for_small_n():
    # deltas 1, 2, 3: of the 8 sign patterns only +++ and --- reach |mean| 2.
    assert stats.sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    assert stats.sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    exact = np.mean(
        [
            abs(np.dot(s, [0.3, 0.1, 0.2, 0.4])) / 4 >= 0.25 - 1e-12
            for s in itertools.product((1, -1), repeat=4)
        ]
    )
    assert stats.sign_flip_p([0.3, 0.1, 0.2, 0.4]) == pytest.approx(exact)


def test_the_sampled_sign_flip_test_is_never_zero_and_is_seeded():
    deltas = [0.5] * 40
    p = stats.sign_flip_p(deltas, seed=3)
    assert p == pytest.approx(1 / 10_001)
    assert stats.sign_flip_p(np.random.default_rng(1).normal(0, 1, 40), seed=3) > 0.05


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (4, 2, 2, 1 - 1 / 6, 1 / 6),
        (4, 0, 2, 0.0, 0.0),
        (4, 4, 4, 1.0, 1.0),
        (4, 1, 1, 0.25, 0.25),
        (10, 3, 4, 1 - math.comb(7, 4) / math.comb(10, 4), 0.0),
    ],
)
def test_pass_at_k_and_pass_hat_k_on_small_tables(n, c, k, at_k, hat_k):
    assert stats.pass_at_k(n, c, k) == pytest.approx(at_k)
    assert stats.pass_hat_k(n, c, k) == pytest.approx(hat_k)


def test_the_holdout_size_for_80_percent_power():
    z = 1.959963984540054 + 0.8416212335729143
    assert stats.holdout_size(0.1, 0.5) == math.ceil((z * 0.5 / 0.1) ** 2) == 197
    with pytest.raises(ValueError):
        stats.holdout_size(0, 0.5)


def test_verdicts_and_their_caveats():
    proven = dict(training_seeds=3, is_training_reward=False, degenerate=False)
    assert stats.verdict(0.2, (0.1, 0.3), 0.05, 100, **proven).text == "improved"
    assert stats.verdict(0.04, (0.01, 0.07), 0.05, 100, **proven).text == "within_noise"
    assert stats.verdict(0.2, (-0.1, 0.5), 0.05, 100, **proven).text == "within_noise"
    assert stats.verdict(-0.2, (-0.3, -0.1), 0.05, 100, **proven).text == "worse"
    assert stats.verdict(0.2, (0.1, 0.3), 0.05, 3, **proven).text == "insufficient_data"
    degenerate = {**proven, "degenerate": True}
    assert stats.verdict(0.2, (0.1, 0.3), 0.05, 100, **degenerate).outcome == "insufficient_data"
    caveats = stats.verdict(
        0.2, (0.1, 0.3), 0.05, 30, training_seeds=1, is_training_reward=True, degenerate=False
    ).text
    assert caveats == (
        "unproven: improved (n=30 tasks < 50; one training seed; the metric is "
        "the training reward itself)"
    )


def test_decontamination_drops_tasks_seen_in_training_and_merges_repeats():
    train = [
        {"id": "a", "prompt_text": "write a poem about the sea"},
        {"id": "b", "prompt_text": "zero one two three four five six seven eight nine ten"},
    ]
    holdout = [
        {"id": "a", "prompt_text": "something new"},  # same id
        {"id": "c", "prompt_text": "Write a poem about the SEA!"},  # same text
        {"id": "d", "prompt_text": "one two three four five six seven eight nine ten"},  # 8-grams
        {"id": "e", "prompt_text": "a fresh question about rivers"},
        {"id": "f", "prompt_text": "a fresh question about rivers"},  # repeat
    ]
    result = decontaminate(holdout, train)
    assert (result.same_id, result.same_text, result.ngram_overlap) == (1, 1, 1)
    assert result.duplicates == 1 and [r["id"] for r in result.kept] == ["e"]
