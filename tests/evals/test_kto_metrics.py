"""evaluate's KTO metric on constructed arms: a held-out 👍 answer made likelier and a 👎 answer
made less likely both count as the model moving the rater's way, and the paired statistics
(bootstrap interval, sign-flip test, verdict) read the signed change as they read any metric."""

import pytest

from posttrain.evals.kto_metrics import SIGNED, feedback_metrics, signed, signed_deltas

LABELS = [True, False] * 6  # 12 held-out rows, 6 of each


def arms(shift_up: float, shift_down: float) -> tuple[list[float], list[float]]:
    """Base log-likelihoods and a trained arm that moves 👍 rows by shift_up and 👎 rows by
    shift_down, each row by a slightly different amount (no two deltas alike)."""
    base = [-2.0 - 0.1 * i for i in range(len(LABELS))]
    trained = [
        b + (shift_up if up else shift_down) * (1 + 0.05 * i)
        for i, (b, up) in enumerate(zip(base, LABELS, strict=True))
    ]
    return base, trained


def test_the_signed_delta_is_positive_when_up_answers_rise_and_down_answers_fall():
    deltas = signed_deltas([-2.0, -2.0, -3.0, -1.0], [-1.5, -2.5, -2.0, -1.4],
                           [True, False, True, False])  # fmt: skip
    assert deltas == pytest.approx([0.5, 0.5, 1.0, 0.4])
    assert signed([-2.0, -2.0], [True, False]) == [-2.0, 2.0]


def test_the_signed_delta_is_negative_when_training_moves_against_the_raters():
    base, trained = arms(shift_up=-0.3, shift_down=+0.3)
    assert all(d < 0 for d in signed_deltas(base, trained, LABELS))


def test_a_trained_arm_that_follows_the_feedback_is_improved_on_every_view():
    base, trained = arms(shift_up=0.4, shift_down=-0.4)
    found = feedback_metrics([{"logliks": {"base": base, "trained": trained}}], LABELS)
    by_name = {m.name: m for m in found}
    headline = by_name[SIGNED]
    assert headline.optimised and headline.higher_is_better
    assert headline.delta > 0 and headline.ci_low > 0
    assert headline.verdict.startswith("unproven: improved")  # 12 rows, one seed
    assert by_name["desirable_loglik"].delta > 0 and not by_name["desirable_loglik"].optimised
    down = by_name["undesirable_loglik"]
    assert down.delta < 0 and not down.higher_is_better
    assert down.verdict.startswith("unproven: improved")  # lower is better for 👎 answers


def test_an_arm_that_lifts_every_answer_alike_is_not_called_a_gain():
    """A model that finds every answer likelier (say, shorter answers everywhere) moves 👍 up
    and 👎 up by the same amount: the signed metric nets out near zero."""
    base, trained = arms(shift_up=0.4, shift_down=0.4)
    [headline, *_] = feedback_metrics([{"logliks": {"base": base, "trained": trained}}], LABELS)
    assert headline.ci_low < 0 < headline.ci_high
    assert "improved" not in headline.verdict


def test_seeds_pair_with_the_first_base_and_arms_without_logliks_give_none():
    base, trained = arms(0.4, -0.4)
    outs = [{"logliks": {"base": base, "trained": trained}},
            {"logliks": {"base": None, "trained": trained}}]  # fmt: skip
    [headline, *_] = feedback_metrics(outs, LABELS)
    assert headline.seeds == 2
    assert feedback_metrics([{"logliks": None}], LABELS) is None
