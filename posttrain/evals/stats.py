"""The small statistics of evaluate beside the comparison itself (posttrain.evals.paired):
pass@k / pass^k, the held-out tasks a minimum effect needs, and the verdict's words.

Every function is pure and small, so each can be checked by hand or against scipy. scipy
loads inside the functions that use it: the server imports this module at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from posttrain.evals.comparison import MIN_TASKS
from posttrain.evals.paired import ALPHA

MIN_TASKS_ANY = MIN_TASKS
# bench/calibration.py measures the verdict's error rates from 20 tasks up; below, a verdict is
# given but called unproven (the t interval leans on per-task deltas not far from normal)
MIN_TASKS_PROVEN = 20
POWER = 0.8
DEFAULT_MDE_SHARE = 0.05  # of a metric's declared range: 0.05 on a 0-1 reward


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): at least one of k samples (from n, c correct) passes."""
    if k > n:
        raise ValueError(f"k={k} is more than the n={n} samples per task")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): all of k samples pass (the task is solved every time)."""
    if k > n:
        raise ValueError(f"k={k} is more than the n={n} samples per task")
    return math.comb(c, k) / math.comb(n, k)


def tasks_needed(
    mde: float, task_sd: float, seed_var: float = 0.0, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Held-out tasks for the verdict to call a true gain of `mde` "improved" with `power`:
    the smallest n with mde >= (t(1 - alpha/2) + t(power)) x sqrt(task_sd^2 / n + seed_var),
    t at n - 1 degrees of freedom. `task_sd` is the sd of the per-task deltas, `seed_var` the
    training seeds' share of the delta's variance, which more tasks do not shrink: None when
    it alone keeps the gain out of reach (more seeds are needed, not more tasks)."""
    if mde <= 0:
        raise ValueError("the minimum detectable effect must be positive")
    from scipy import stats as scipy_stats

    z = scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power)
    room = (mde / z) ** 2 - seed_var
    if room <= 0:
        return None
    if task_sd == 0:
        return MIN_TASKS
    n = max(MIN_TASKS, math.ceil(task_sd**2 / room))
    while True:  # the t quantiles at n - 1 df: a few more tasks than the normal's answer
        t = scipy_stats.t.ppf(1 - alpha / 2, n - 1) + scipy_stats.t.ppf(power, n - 1)
        if (mde / t) ** 2 - seed_var > 0 and n >= task_sd**2 / ((mde / t) ** 2 - seed_var):
            return n
        n += max(1, n // 50)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # improved | within_noise | worse | insufficient_data
    unproven: tuple[str, ...]  # why an outcome is not yet proof

    @property
    def text(self) -> str:
        if self.unproven:
            return f"unproven: {self.outcome} ({'; '.join(self.unproven)})"
        return self.outcome


def verdict(
    outcome: str, n_tasks: int, *, training_seeds: int, is_training_reward: bool
) -> Verdict:
    """The outcome of the interval (posttrain.evals.comparison.verdict_of), with what keeps
    it from being proof: few tasks, a training noise not measured (one seed), a metric that
    is the training reward itself (it may have been gamed)."""
    reasons = []
    if n_tasks < MIN_TASKS_PROVEN:
        reasons.append(f"n={n_tasks} tasks < {MIN_TASKS_PROVEN}")
    if training_seeds < 2:
        reasons.append("one training seed")
    if is_training_reward:
        reasons.append("the metric is the training reward itself")
    # insufficient_data claims nothing, so it needs no "unproven" caveats
    return Verdict(outcome, () if outcome == "insufficient_data" else tuple(reasons))
