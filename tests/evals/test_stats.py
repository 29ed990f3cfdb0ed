"""The evaluation statistics beside the comparison, against values computed by hand, by
scipy or by simulation."""

import math
import random

import numpy as np
import pytest

from posttrain.evals import paired, stats
from posttrain.evals.decontam import decontaminate


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


def test_tasks_needed_is_the_t_power_formula_and_holds_by_simulation():
    z = 1.959963984540054 + 0.8416212335729143
    normal = math.ceil((z * 0.5 / 0.1) ** 2)  # 197 by the normal approximation
    n = stats.tasks_needed(0.1, 0.5)
    assert normal <= n <= normal + 5  # the t quantiles ask a few more
    # measured: per-task deltas of sd 0.5 around a true 0.1, n tasks, the verdict's interval
    rng = np.random.default_rng(0)
    found = np.mean(
        [paired.difference([rng.normal(0.1, 0.5, n)], [np.zeros(n)]).low > 0 for _ in range(2000)]
    )
    assert 0.77 <= found <= 0.83
    # a seeds' share of the variance more tasks cannot shrink: out of reach, said as None
    assert stats.tasks_needed(0.1, 0.5, seed_var=(0.1 / z) ** 2) is None
    assert stats.tasks_needed(0.1, 0.5, seed_var=0.0005) > n
    with pytest.raises(ValueError):
        stats.tasks_needed(0, 0.5)


def test_verdicts_and_their_caveats():
    proven = dict(training_seeds=3, is_training_reward=False)
    assert stats.verdict("improved", 100, **proven).text == "improved"
    assert stats.verdict("insufficient_data", 3, **proven).text == "insufficient_data"
    caveats = stats.verdict("improved", 12, training_seeds=1, is_training_reward=True).text
    assert caveats == (
        "unproven: improved (n=12 tasks < 20; one training seed; the metric is "
        "the training reward itself)"
    )
    assert stats.verdict("within_noise", 60, training_seeds=2, is_training_reward=False).text == (
        "within_noise"  # two seeds are counted in the interval: no caveat of their own
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


def test_a_long_template_around_new_questions_is_not_taken_for_training_text():
    """40 words of instructions around a 6-word question: the template's 8-grams are in every
    training row, so they are nobody's task. Measured before: every new question 85% "seen"."""
    template = (
        "You are a careful assistant that reads customer reviews for an online shop. Read the "
        "review below and answer with exactly one word, positive or negative, with no "
        "explanation and no punctuation at all please. Review: {}"
    )
    rng = random.Random(0)
    words = [f"w{i}" for i in range(400)]

    def row(i: int, question: str) -> dict:
        return {"id": f"r{i}", "prompt_text": template.format(question)}

    questions = [" ".join(rng.sample(words, 6)) for _ in range(60)]
    train = [row(i, q) for i, q in enumerate(questions[:40])]
    new = [row(100 + i, q) for i, q in enumerate(questions[40:])]
    near = [row(200, questions[3] + " indeed"), row(201, questions[9] + " truly")]
    result = decontaminate(new + near, train)
    assert result.boilerplate > 20  # the template's 8-grams, shared by all 40 rows
    assert [r["id"] for r in result.kept] == [r["id"] for r in new]
    assert result.ngram_overlap == 2  # a training question with a word added is still seen
    few = decontaminate(new + near, train[:2])  # 2 rows: too few to call anything a template
    assert few.boilerplate == 0 and few.ngram_overlap == 22
