"""Pass rates: the share of held-out tasks whose samples reach the reward's threshold, as
pass@1, pass@k (at least one of k passes) and pass^k (all k pass), base against trained.

Each side pools every pass it has: the trained side every training seed's trained pass, the
base side every base pass (the noise passes of the first run, and each later run's own base
where it has one). A task's n samples, c of them passing, give the unbiased estimates
c/n, 1 - C(n-c, k)/C(n, k) and C(c, k)/C(n, k).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import BaseModel

from posttrain.evals import stats

Pass = dict[str, list[list[float]]]  # metric -> [task][sample] values of one pass


class PassRates(BaseModel):
    threshold: float
    k: int
    base: dict[str, float]
    trained: dict[str, float]


def pass_rates(
    base: list[list[list[float]]], trained: list[list[list[float]]], threshold: float, k: int
) -> PassRates:
    """base, trained: [pass][task][sample] rewards, every pass on the same tasks."""

    def rates(passes: list[list[list[float]]]) -> dict[str, float]:
        pooled = [[v for one in passes for v in one[i]] for i in range(len(passes[0]))]
        counts = [(len(task), sum(v >= threshold for v in task)) for task in pooled]
        return {
            "pass@1": statistics.fmean(stats.pass_at_k(n, c, 1) for n, c in counts),
            f"pass@{k}": statistics.fmean(stats.pass_at_k(n, c, k) for n, c in counts),
            f"pass^{k}": statistics.fmean(stats.pass_hat_k(n, c, k) for n, c in counts),
        }

    return PassRates(threshold=threshold, k=k, base=rates(base), trained=rates(trained))


def pass_threshold(
    reward: Any, passes: list[Pass], trained: list[Pass], given: float | None
) -> tuple[float | None, str]:
    """The reward a sample must reach to pass, and why: the user's (--threshold, or the spec's
    eval.pass_threshold); 1 for a reward whose every score is 0 or 1; half the range of a
    reward that declares one; else none (a threshold guessed from the scores, such as their
    median, would say nothing: pass rates of 1.00 beside a mean reward of 0.05)."""
    if given is not None:
        return given, "the threshold given"
    every = [v for p in [*passes, *trained] for task in p["reward"] for v in task]
    if every and all(v in (0.0, 1.0) for v in every):
        return 1.0, "a 0/1 reward passes at 1"
    low, top = reward.value_range if reward is not None else (-math.inf, math.inf)
    if math.isfinite(low) and math.isfinite(top):
        return low + 0.5 * (top - low), "half the reward's declared range"
    return None, (
        f"reward '{getattr(reward, 'name', reward)}' declares no range and its scores are not "
        f"all 0 or 1, so no threshold means 'passed'; give one (evaluate --threshold, the "
        f"spec's eval.pass_threshold, or the reward's params.value_range)"
    )


def base_pool(passes: list[Pass], base_by_seed: list[Pass]) -> list[Pass]:
    """Every base pass an evaluation has: the first run's, then each later run's own base
    pass (a run that shares the first base has none of its own)."""
    return passes + [b for b in base_by_seed[1:] if all(b is not p for p in passes)]


def pass_rates_of(
    base: list[Pass], trained: list[Pass], threshold: float | None, k: int
) -> PassRates | None:
    """Pass rates at the threshold over every base and every trained pass (None: no
    threshold, so not reported)."""
    if threshold is None:
        return None
    return pass_rates([b["reward"] for b in base], [t["reward"] for t in trained], threshold, k)
