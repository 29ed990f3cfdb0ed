"""The statistics of evaluate: paired deltas, a bootstrap interval, a permutation test, the
noise floor of the evaluation itself, pass@k / pass^k, and the verdict.

Every function is pure and small, so each can be checked by hand or against scipy.
numpy and scipy load inside the functions that compute: the server imports this module (through
evaluate's result types) at start-up, and scipy alone costs it ~0.5 s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_DRAWS = 2000
PERMUTATIONS = 10_000
EXACT_PERMUTATION_MAX_N = 12  # 2^12 sign patterns: enumerate them all instead of sampling
MIN_TASKS_PROVEN = 50
MIN_TASKS_ANY = 5
ALPHA = 0.05


def bootstrap_ci(
    deltas: Sequence[float], seed: int = 0, draws: int = BOOTSTRAP_DRAWS, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean delta, resampling tasks with replacement.

    Draw b resamples n task indices with numpy's Generator(seed).integers(0, n, n), in order.
    """
    import numpy as np

    values = np.asarray(deltas, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.array(
        [values[rng.integers(0, len(values), len(values))].mean() for _ in range(draws)]
    )
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def sign_flip_p(deltas: Sequence[float], seed: int = 0, permutations: int = PERMUTATIONS) -> float:
    """Two-sided p-value of the mean delta under random sign flips (paired permutation test).

    Exact over all 2^n sign patterns for n <= 12; otherwise `permutations` random patterns,
    with p = (1 + hits) / (1 + permutations) so it is never zero.
    """
    import numpy as np

    values = np.asarray(deltas, dtype=float)
    n = len(values)
    observed = abs(values.mean())
    eps = 1e-12
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ values / n)
        return float((means >= observed - eps).mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(permutations, n))
    hits = int((np.abs(signs @ values / n) >= observed - eps).sum())
    return (1 + hits) / (1 + permutations)


@dataclass(frozen=True)
class NoiseFloor:
    t: float  # two-sided t quantile at 1 - alpha/2
    df: int
    run_std: float  # std (ddof=1) of the metric's mean across the base passes
    value: float

    @property
    def formula(self) -> str:
        return (
            f"t(0.975, df={self.df}) x run_std x sqrt(1/1 + 1/1) = {self.t:.3f} x "
            f"{self.run_std:.4f} x {math.sqrt(2):.3f} = {self.value:.4f}"
        )


def noise_floor(pass_means: Sequence[float], alpha: float = ALPHA) -> NoiseFloor:
    """How far two single passes of the *same* model differ by chance.

    The difference of two single passes has sd run_std x sqrt(1/1 + 1/1); a two-sided t
    quantile with df = passes - 1 turns it into a threshold a real change must clear.
    """
    if len(pass_means) < 2:
        raise ValueError("the noise floor needs at least two base passes (three recommended)")
    import numpy as np
    from scipy import stats as scipy_stats

    df = len(pass_means) - 1
    t = float(scipy_stats.t.ppf(1 - alpha / 2, df))
    run_std = float(np.std(pass_means, ddof=1))
    return NoiseFloor(t, df, run_std, t * run_std * math.sqrt(1 / 1 + 1 / 1))


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


def holdout_size(effect: float, sd: float, alpha: float = ALPHA, power: float = 0.8) -> int:
    """Tasks needed to detect a mean paired delta `effect` with 80% power at alpha 0.05,
    when per-task deltas have standard deviation `sd`: ((z_{1-a/2} + z_power) sd / effect)^2."""
    if effect <= 0:
        raise ValueError("effect must be positive")
    from scipy import stats as scipy_stats

    z = scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power)
    return math.ceil((z * sd / effect) ** 2)


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
    delta: float,
    ci: tuple[float, float],
    floor: float,
    n_tasks: int,
    *,
    training_seeds: int,
    is_training_reward: bool,
    degenerate: bool,
) -> Verdict:
    """improved when the interval excludes 0 and the delta clears the noise floor; worse when
    both hold the other way; within_noise otherwise; insufficient_data when there is too
    little to say anything."""
    if degenerate or n_tasks < MIN_TASKS_ANY:
        outcome = "insufficient_data"
    elif ci[0] > 0 and delta > floor:
        outcome = "improved"
    elif ci[1] < 0 and -delta > floor:
        outcome = "worse"
    else:
        outcome = "within_noise"
    reasons = []
    if n_tasks < MIN_TASKS_PROVEN:
        reasons.append(f"n={n_tasks} tasks < {MIN_TASKS_PROVEN}")
    if training_seeds < 2:
        reasons.append("one training seed")
    elif training_seeds < 3:
        reasons.append(f"{training_seeds} training seeds < 3")
    if is_training_reward:
        reasons.append("the metric is the training reward itself")
    # insufficient_data claims nothing, so it needs no "unproven" caveats
    return Verdict(outcome, () if outcome == "insufficient_data" else tuple(reasons))
