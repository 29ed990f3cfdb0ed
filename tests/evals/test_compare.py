"""An experiment's comparison against values worked by hand: the best arm named only when its
interval against every other arm (tasks and the seeds' training noise, pooled over the arms)
lies above zero, a tie said as a tie, and arms on different tasks refused rather than
paired."""

import time

import pytest

from posttrain.core.errors import ConfigError
from posttrain.evals.compare import compare
from posttrain.evals.evaluation import EvalResult
from posttrain.evals.metrics import metric_result

N = 60


def arm(name, base, seeds, prompts=None, spread=0.01):
    """An arm's evaluation: `base` per task (its other passes `spread` apart), and each
    seed's trained value per task."""
    tasks = lambda values: [[v] for v in values]  # noqa: E731
    passes = [tasks(base), tasks([b + spread for b in base]), tasks([b - spread for b in base])]
    m = metric_result("reward", passes, [tasks(base)] * len(seeds), [tasks(s) for s in seeds])
    return (
        name,
        {"algorithm.learning_rate": name},
        EvalResult(
            run_id=f"exp-x [{name}]",
            runs=[f"run-{name}-{i}" for i in range(len(seeds))],
            training_seeds=len(seeds),
            created_at=time.time(),
            verdict=m.verdict,
            tasks_total=N,
            tasks_used=N,
            dropped_contaminated={},
            k=1,
            base_passes=3,
            seeds={},
            metrics=[m],
            task_prompts=prompts or [f"q{i}" for i in range(N)],
            task_values={"reward": [list(s) for s in seeds]},
        ),
    )


def test_an_arm_that_leads_every_seed_by_far_is_best_beyond_noise():
    base = [0.2 + 0.01 * (i % 5) for i in range(N)]
    good = arm(
        "0.001", base, [[b + 0.6 for b in base], [b + 0.55 for b in base], [b + 0.62 for b in base]]
    )
    flat = arm("0", base, [[b + 0.01 for b in base], list(base), [b - 0.01 for b in base]])
    result = compare("exp-x", [flat, good], metric="reward", goal="maximize")
    assert [a.arm for a in result.arms] == ["0.001", "0"]  # ranked, whatever the sweep order
    behind = result.arms[1].vs_best
    assert behind.delta == pytest.approx(0.59, abs=1e-9)  # (0.6+0.55+0.62)/3 - 0
    assert behind.beyond_noise and behind.p_value < 0.05 and behind.ci_low > 0
    assert result.best == "0.001"
    assert result.verdict == (
        "unproven: best_beyond_noise (0.001) (the metric is the training reward itself)"
    )


def test_a_lead_the_seeds_disagree_on_is_a_tie_not_a_winner():
    base = [0.3] * N
    erratic = arm("a", base, [[0.9] * N, [0.3] * N, [0.1] * N])  # mean +0.13, seeds apart
    steady = arm("b", base, [[0.33] * N, [0.3] * N, [0.3] * N])
    result = compare("exp-x", [erratic, steady])
    assert result.arms[0].arm == "a" and result.best is None
    behind = result.arms[1].vs_best
    assert not behind.beyond_noise and behind.ci_low < 0 < behind.delta  # 0.10 ahead
    assert result.seed_sd > 0.1  # the seeds 0.9, 0.3, 0.1 apart: their spread is counted
    assert result.verdict.startswith("unproven: tied_within_noise (a, b)")


def test_one_seed_per_arm_is_said_as_unmeasured_training_noise():
    base = [0.2] * N
    result = compare("exp-x", [arm("a", base, [[0.8] * N]), arm("b", base, [[0.2] * N])])
    assert "one training seed per arm: training noise is not measured" in result.caveats


def test_a_metric_that_is_zero_everywhere_ranks_nothing():
    base = [0.0] * N
    zero = [[0.0] * N] * 2
    result = compare("exp-x", [arm("a", base, zero, spread=0), arm("b", base, zero, spread=0)])
    assert result.verdict == "insufficient_data" and result.best is None


def test_a_goal_of_minimize_ranks_the_lowest_first():
    base = [0.5] * N
    low = arm("low", base, [[0.1] * N, [0.12] * N])
    high = arm("high", base, [[0.5] * N, [0.52] * N])
    result = compare("exp-x", [high, low], goal="minimize")
    assert result.arms[0].arm == "low" and result.arms[1].vs_best.delta == pytest.approx(0.4)


def test_arms_evaluated_on_different_tasks_are_refused_not_paired():
    base = [0.2] * N
    one = arm("a", base, [[0.5] * N])
    other = arm("b", base, [[0.5] * N], prompts=[f"other {i}" for i in range(N)])
    with pytest.raises(ConfigError, match="other held-out tasks"):
        compare("exp-x", [one, other])
    with pytest.raises(ConfigError, match="was not measured per task"):
        compare("exp-x", [one, arm("c", base, [[0.5] * N])], metric="relevance")
