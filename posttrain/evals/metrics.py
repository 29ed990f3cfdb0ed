"""Per-metric results of an evaluation: paired deltas over tasks, averaged over the training
seeds of a group, against the evaluation's noise floor and the spread between seeds.

A metric is `optimised` when the training reward pays it (the reward, its headline
components, the rhyme rate); `reference_nll` and answer length are not, and are reported
apart: a gain in the reward with the reference answers' likelihood falling apart is not the
same result as a clean gain.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from posttrain.evals import stats
from posttrain.evals.episode_metrics import DESCRIBED
from posttrain.rewards.base import Scores
from posttrain.rewards.text import completion_text, plain_text

RHYME_RATE_AT = 0.75  # a sample "rhymes" when its rhyme component reaches this
# Described, never judged better or worse (no verdict, no regression): answer length, and an
# episode's turns and tool calls (posttrain.evals.episode_metrics.DESCRIBED)
DIRECTIONLESS = ("length_words", *DESCRIBED)


class MetricResult(BaseModel):
    name: str
    is_training_reward: bool = False
    optimised: bool = Field(True, description="Whether the training reward pays this metric.")
    higher_is_better: bool = True
    base_pass_means: list[float] = Field(description="The metric's mean in each base pass.")
    base_mean: float = Field(description="Base pass 1, paired with the trained pass.")
    trained_mean: float = Field(description="The mean over seeds of each seed's trained pass.")
    delta: float = Field(description="trained - base, per task, averaged over seeds and tasks.")
    ci_low: float
    ci_high: float
    p_value: float
    noise_floor: float
    noise_formula: str
    seeds: int = 1
    seed_deltas: list[float] = Field(default_factory=list, description="Each seed's delta.")
    seed_floor: float = Field(
        0.0, description="Half-width of the seeds' 95% interval: the training noise."
    )
    verdict: str
    degenerate: str | None = None


def per_sample_metrics(
    headline: Sequence[str], scores: Scores | None, completions: list[str], n_tasks: int, k: int
) -> dict[str, list[list[float]]]:
    """metric -> [task][sample] values, for one pass scored by the reward (its `headline`
    components among them); with no reward (scores None), the answer length alone."""
    values: dict[str, list[float]] = {}
    if scores is not None:
        values["reward"] = scores.rewards
        for name in headline:
            values[name] = scores.components[name]
    if scores is not None and "rhyme" in scores.components:
        values["rhyme_rate"] = [float(v >= RHYME_RATE_AT) for v in scores.components["rhyme"]]
    values["length_words"] = [
        float(len(plain_text(completion_text(c)).split())) for c in completions
    ]
    return {
        name: [vals[i * k : (i + 1) * k] for i in range(n_tasks)] for name, vals in values.items()
    }


def degenerate(values: list[float]) -> str | None:
    if values and all(v == 0 for v in values):
        return "every score is 0"
    if values and all(v == 1 for v in values):
        return "every score is 1"
    return None


def seed_floor(seed_deltas: list[float], alpha: float = stats.ALPHA) -> float:
    """How far the seeds' mean delta may sit from zero by training noise alone: the
    half-width of its t interval, t(1 - a/2, n - 1) x sd / sqrt(n); 0 with one seed."""
    n = len(seed_deltas)
    if n < 2:
        return 0.0
    from scipy import stats as scipy_stats  # ~0.5 s: not at the server's start-up

    t = float(scipy_stats.t.ppf(1 - alpha / 2, n - 1))
    return t * statistics.stdev(seed_deltas) / math.sqrt(n)


def metric_result(
    name: str,
    base_passes: list[list[list[float]]],
    base_by_seed: list[list[list[float]]],
    trained_by_seed: list[list[list[float]]],
    *,
    seed: int,
    optimised: bool = True,
    higher_is_better: bool = True,
) -> MetricResult:
    """base_passes: [pass][task][sample] of one base (its passes measure the evaluation's
    noise); base_by_seed, trained_by_seed: [seed][task][sample], each seed's trained pass
    paired with its own base's pass 1 on the same tasks."""
    task_means = [[statistics.fmean(s) for s in one_pass] for one_pass in base_passes]
    pass_means = [statistics.fmean(p) for p in task_means]
    per_seed = [
        [statistics.fmean(t) - statistics.fmean(b) for t, b in zip(trained, base, strict=True)]
        for trained, base in zip(trained_by_seed, base_by_seed, strict=True)
    ]
    deltas = [statistics.fmean(column) for column in zip(*per_seed, strict=True)]  # per task
    seed_deltas = [statistics.fmean(d) for d in per_seed]
    floor = stats.noise_floor(pass_means)
    training = seed_floor(seed_deltas)
    ci = stats.bootstrap_ci(deltas, seed=seed)
    delta = statistics.fmean(deltas)
    every = [v for p in base_passes for task in p for v in task] + [
        v for trained in trained_by_seed for task in trained for v in task
    ]
    bad = degenerate(every) if name not in DIRECTIONLESS and higher_is_better else None
    sign = 1.0 if higher_is_better else -1.0  # the verdict judges "better", not "higher"
    verdict = stats.verdict(
        sign * delta,
        (min(sign * ci[0], sign * ci[1]), max(sign * ci[0], sign * ci[1])),
        max(floor.value, training),
        len(deltas),
        training_seeds=len(seed_deltas),
        is_training_reward=name == "reward",
        degenerate=bad is not None,
    )
    trained_means = [statistics.fmean(statistics.fmean(s) for s in t) for t in trained_by_seed]
    return MetricResult(
        name=name,
        is_training_reward=name == "reward",
        optimised=optimised,
        higher_is_better=higher_is_better,
        base_pass_means=pass_means,
        base_mean=statistics.fmean(
            statistics.fmean(statistics.fmean(s) for s in b) for b in base_by_seed
        ),
        trained_mean=statistics.fmean(trained_means),
        delta=delta,
        ci_low=ci[0],
        ci_high=ci[1],
        p_value=stats.sign_flip_p([sign * d for d in deltas], seed=seed),
        noise_floor=floor.value,
        noise_formula=floor.formula,
        seeds=len(seed_deltas),
        seed_deltas=seed_deltas,
        seed_floor=training,
        verdict=verdict.text,
        degenerate=bad,
    )


def regressions(unoptimised: list[MetricResult]) -> list[str]:
    """Un-optimised metrics that got worse beyond noise: the interval of the paired per-task
    deltas lies on the worse side of zero and the mean clears the base passes' noise floor.
    One rule for a run and a group: the training-seed spread of a group widens what counts as
    a proven gain, never what hides a loss every seed's tasks show."""
    worse = []
    for m in unoptimised:
        if m.name in DIRECTIONLESS or m.degenerate:
            continue
        sign = 1.0 if m.higher_is_better else -1.0  # worse: lower, or higher for a loss
        if max(sign * m.ci_low, sign * m.ci_high) < 0 and -sign * m.delta > m.noise_floor:
            worse.append(m.name)
    return worse


def qualified(headline: str, worse: list[str]) -> str:
    """The headline verdict, qualified when a regression came with it: 'improved' becomes
    'improved_with_regression (reference_nll worse beyond noise)'; any other outcome that
    claims something keeps its name and says the regression too."""
    if not worse:
        return headline
    outcome = "improved_with_regression"
    note = f"{', '.join(worse)} worse beyond noise"
    if headline.startswith("unproven: improved"):
        return headline.replace("unproven: improved (", f"unproven: {outcome} ({note}; ", 1)
    if headline == "improved":
        return f"{outcome} ({note})"
    if headline.startswith("insufficient_data"):
        return headline  # it claims nothing, so nothing is qualified
    if headline.endswith(")"):  # "unproven: within_noise (n=30 tasks < 50)"
        return headline.replace(" (", f" ({note}; ", 1)
    return f"{headline} ({note})"
