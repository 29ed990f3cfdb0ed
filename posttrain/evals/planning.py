"""How many held-out tasks an evaluation needs: for its verdict to call a gain of the minimum
detectable effect "improved" 80% of the time, from the spread this evaluation measured (never
from its observed effect, which would plan to confirm whatever it happened to see)."""

from __future__ import annotations

import math
from typing import Any

from posttrain.evals import stats
from posttrain.evals.metrics import MetricResult


def planned_tasks(headline: MetricResult, mde: float | None, reward: Any) -> tuple[int | None, str]:
    """The tasks needed (None: unreachable, or nothing to plan for) and what they are for."""
    seed_var = headline.seed_sd**2
    task_sd = math.sqrt(max(0.0, headline.se**2 - seed_var) * headline.tasks)
    mde, source = (mde, "eval.mde") if mde is not None else default_mde(headline, reward, task_sd)
    if mde is None:
        return None, f"{headline.name}: {source}"
    needed = stats.tasks_needed(mde, task_sd, seed_var)
    words = (
        f"{headline.name}: {stats.POWER:.0%} power to call a gain of {mde:.3g} improved "
        f"({source}; set eval.mde to plan for another)"
    )
    if needed is None:
        words += (
            "; the training seeds' spread alone hides a gain that small at any number of "
            "tasks: train more seeds"
        )
    return needed, words


def default_mde(headline: MetricResult, reward: Any, task_sd: float) -> tuple[float | None, str]:
    """The stated default: 5% of the reward's declared range; 0.05 on a metric that lives in
    0-1 (a rate, an accuracy); else a fifth of the per-task deltas' sd (a small effect)."""
    low, top = getattr(reward, "value_range", (-math.inf, math.inf))
    if headline.is_training_reward and math.isfinite(low) and math.isfinite(top) and top > low:
        return stats.DEFAULT_MDE_SHARE * (top - low), "5% of the reward's range"
    seen = [*headline.base_pass_means, headline.trained_mean]
    if min(seen) >= 0 and max(seen) <= 1 and headline.name != "reference_nll":
        return stats.DEFAULT_MDE_SHARE, "0.05 on a 0-1 metric"
    if task_sd > 0:
        return 0.2 * task_sd, "a fifth of the per-task deltas' sd"
    return None, "it did not vary: no effect size to plan for"
