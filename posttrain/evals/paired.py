"""The one comparison behind every verdict: a paired difference of two arms' scores, with one
uncertainty that holds tasks, samples within a task, evaluation passes and training seeds.

An arm's scores are a matrix, replicates x tasks (a replicate is an evaluation pass or a
training seed; each cell the mean of that replicate's samples of the task). The model:

    score[r, t] = arm mean + task effect[t] + arm x task[t] + replicate effect[r] + noise[r, t]

The delta is the difference of the two arms' means over the tasks both have, the task effect
cancelling because the tasks are paired. Its variance has two parts:

- the per-task differences (each arm's replicate mean of the task, subtracted): their
  variance over n tasks holds the arm x task interaction and the sampling noise of every
  sample and pass, so samples correlated within a task count once, as the cluster they are;
- the replicate effect (a training seed that moves the whole arm), which is shared by every
  task and so invisible to the first part: its variance comes from a replicates x tasks
  analysis of variance, (MS between replicates - MS residual) / n, divided by the arm's
  replicates. Arms trained the same way pool it (`pooled`); an arm of one seed borrows the
  pool, or has none measured.

The two parts add; Satterthwaite's formula gives the degrees of freedom of the sum, and the
interval is the t interval at them.

numpy and scipy load inside the functions: the server imports this module at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ALPHA = 0.05  # two-sided: "improved" is claimed falsely at most 2.5% of the time


@dataclass(frozen=True)
class Spread:
    """A replicates x tasks analysis of variance of one arm (or several arms pooled)."""

    ms_replicate: float  # mean square between replicates' means
    df_replicate: int
    ms_residual: float  # replicate x task mean square: the noise within a task
    df_residual: int
    tasks: float

    @property
    def replicate_var(self) -> float:
        """The replicate effect's variance: how far a seed moves the arm's mean, squared."""
        return max(0.0, (self.ms_replicate - self.ms_residual) / self.tasks)


def spread(matrix: Any) -> Spread | None:
    """The analysis of variance of a replicates x tasks matrix; None with one replicate."""
    import numpy as np

    m = np.asarray(matrix, dtype=float)
    reps, n = m.shape
    if reps < 2 or n < 2:
        return None
    rep_means, task_means, grand = m.mean(axis=1), m.mean(axis=0), m.mean()
    residual = m - rep_means[:, None] - task_means[None, :] + grand
    df_rep, df_res = reps - 1, (reps - 1) * (n - 1)
    return Spread(
        ms_replicate=float(n * ((rep_means - grand) ** 2).sum() / df_rep),
        df_replicate=df_rep,
        ms_residual=float((residual**2).sum() / df_res),
        df_residual=df_res,
        tasks=float(n),
    )


def pooled(spreads: list[Spread | None]) -> Spread | None:
    """Several arms' spreads as one: sums of squares and degrees of freedom add."""
    known = [s for s in spreads if s is not None]
    if not known:
        return None
    df_rep = sum(s.df_replicate for s in known)
    df_res = sum(s.df_residual for s in known)
    return Spread(
        ms_replicate=sum(s.ms_replicate * s.df_replicate for s in known) / df_rep,
        df_replicate=df_rep,
        ms_residual=sum(s.ms_residual * s.df_residual for s in known) / df_res,
        df_residual=df_res,
        tasks=sum(s.tasks * s.df_replicate for s in known) / df_rep,
    )


@dataclass(frozen=True)
class Estimate:
    """a - b over the paired tasks, with its standard error, degrees of freedom and the
    (1 - alpha) t interval."""

    delta: float
    se: float
    df: float
    low: float
    high: float
    tasks: int
    replicate_sd: float  # the replicate (seed) effect's sd counted in se; 0: none measured

    @property
    def p_value(self) -> float:
        """Two-sided p of the t statistic (1.0 for a constant difference of 0)."""
        from scipy import stats as scipy_stats

        if self.se == 0:
            return 1.0 if self.delta == 0 else 0.0
        return float(2 * scipy_stats.t.sf(abs(self.delta) / self.se, self.df))


def difference(
    a: Any,
    b: Any,
    spread_a: Spread | None = None,
    spread_b: Spread | None = None,
    alpha: float = ALPHA,
) -> Estimate:
    """a minus b, each a replicates x tasks matrix over the same tasks in the same order.

    `spread_a`/`spread_b` give each arm's replicate variance (its own `spread`, or a pool of
    arms trained alike); None counts none."""
    import numpy as np
    from scipy import stats as scipy_stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    per_task = a.mean(axis=0) - b.mean(axis=0)
    n = len(per_task)
    # (value, df) of each mean square's share of the variance, for Satterthwaite
    terms = [(float(per_task.var(ddof=1)) / n if n > 1 else 0.0, n - 1)]
    replicate_var = 0.0
    for s, reps in ((spread_a, a.shape[0]), (spread_b, b.shape[0])):
        if s is not None and s.replicate_var > 0:
            c = 1 / (reps * s.tasks)
            terms += [(c * s.ms_replicate, s.df_replicate), (-c * s.ms_residual, s.df_residual)]
            replicate_var += s.replicate_var / reps
    var = max(0.0, sum(v for v, _ in terms))
    denominator = sum(v * v / df for v, df in terms if df > 0)
    df = var * var / denominator if denominator > 0 else max(n - 1, 1)
    se = math.sqrt(var)
    half = float(scipy_stats.t.ppf(1 - alpha / 2, max(df, 1.0))) * se
    delta = float(per_task.mean())
    return Estimate(delta, se, float(df), delta - half, delta + half, n, math.sqrt(replicate_var))
