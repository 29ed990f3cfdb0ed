"""Per-metric results of an evaluation: the trained model against its base, paired by task,
its interval holding the tasks, the samples, the base's passes and a group's training seeds
(posttrain.evals.paired).

A metric is `optimised` when the training reward pays it (the reward, its headline
components, the rhyme rate); `reference_nll` and answer length are not, and are reported
apart: a gain in the reward with the reference answers' likelihood falling apart is not the
same result as a clean gain.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from posttrain.evals import paired, stats
from posttrain.evals.comparison import verdict_of
from posttrain.evals.episode_metrics import DESCRIBED
from posttrain.rewards.base import Scores
from posttrain.rewards.text import completion_text, plain_text

RHYME_RATE_AT = 0.75  # a sample "rhymes" when its rhyme component reaches this
# Described, never judged better or worse (no verdict, no regression): answer length, and an
# episode's turns and tool calls (posttrain.evals.episode_metrics.DESCRIBED)
DIRECTIONLESS = ("length_words", *DESCRIBED)
DESCRIBED_VERDICT = "described"  # a directionless metric: its means shown, never judged


class MetricResult(BaseModel):
    name: str
    is_training_reward: bool = False
    optimised: bool = Field(True, description="Whether the training reward pays this metric.")
    higher_is_better: bool = True
    base_pass_means: list[float] = Field(description="The metric's mean in each base pass.")
    base_mean: float = Field(description="The base's mean over its passes (per seed's base).")
    trained_mean: float = Field(description="The mean over seeds of each seed's trained pass.")
    delta: float = Field(description="trained - base, per task, averaged over seeds and tasks.")
    ci_low: float
    ci_high: float
    se: float = Field(
        0.0, description="The delta's standard error: tasks, samples, passes and seeds."
    )
    df: float = Field(0.0, description="Its degrees of freedom (Satterthwaite).")
    tasks: int = Field(0, description="The tasks paired (every pass graded them).")
    p_value: float
    seeds: int = 1
    seed_deltas: list[float] = Field(default_factory=list, description="Each seed's delta.")
    seed_sd: float = Field(
        0.0, description="The training seeds' sd counted in the interval (0: not measured)."
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


def metric_result(
    name: str,
    base_passes: list[list[list[float]]],
    base_by_seed: list[list[list[float]]],
    trained_by_seed: list[list[list[float]]],
    *,
    optimised: bool = True,
    higher_is_better: bool = True,
) -> MetricResult:
    """base_passes: [pass][task][sample] of one base (its passes are its replicates);
    base_by_seed, trained_by_seed: [seed][task][sample]. With one base for every seed, the
    seeds (the arm's replicates) are compared with the base's passes; with a base of each
    seed's own (its own warm-start), each seed's trained pass minus its own base. Either way
    through `posttrain.evals.paired`, the one comparison every verdict uses."""
    import numpy as np

    base = np.array([_task_means(p) for p in base_passes])
    bases = np.array([_task_means(b) for b in base_by_seed])
    trained = np.array([_task_means(t) for t in trained_by_seed])
    shared = all(np.array_equal(b, base[0]) for b in bases)
    if shared:
        est = paired.difference(trained, base, paired.spread(trained), paired.spread(base))
        against = np.broadcast_to(base.mean(axis=0), trained.shape)
    else:  # each seed against its own base
        against = bases
        own = trained - bases
        est = paired.difference(own, np.zeros((1, own.shape[1])), paired.spread(own))
    every = [v for p in base_passes for task in p for v in task] + [
        v for one in trained_by_seed for task in one for v in task
    ]
    bad = degenerate(every) if name not in DIRECTIONLESS and higher_is_better else None
    sign = 1.0 if higher_is_better else -1.0  # the verdict judges "better", not "higher"
    outcome, _ = verdict_of(est, sign, constant=len(set(every)) == 1)
    if bad is not None:
        outcome = "insufficient_data"
    verdict = stats.verdict(
        outcome,
        est.tasks,
        training_seeds=len(trained),
        is_training_reward=name == "reward",
    ).text
    if name in DIRECTIONLESS:  # answer length, turns, tool calls: the means and the interval
        verdict = DESCRIBED_VERDICT
    return MetricResult(
        name=name,
        is_training_reward=name == "reward",
        optimised=optimised,
        higher_is_better=higher_is_better,
        base_pass_means=[float(m) for m in base.mean(axis=1)],
        base_mean=float(against.mean()),
        trained_mean=float(trained.mean()),
        delta=est.delta,
        ci_low=est.low,
        ci_high=est.high,
        se=est.se,
        df=est.df,
        tasks=est.tasks,
        p_value=est.p_value,
        seeds=len(trained),
        seed_deltas=[float(d) for d in (trained - against).mean(axis=1)],
        seed_sd=est.replicate_sd,
        verdict=verdict,
        degenerate=bad,
    )


def _task_means(one_pass: list[list[float]]) -> list[float]:
    return [statistics.fmean(samples) for samples in one_pass]


def regressions(unoptimised: list[MetricResult]) -> list[str]:
    """Un-optimised metrics that got worse beyond noise: the same interval as every verdict
    lies on the worse side of zero."""
    worse = []
    for m in unoptimised:
        if m.name in DIRECTIONLESS or m.degenerate:
            continue
        sign = 1.0 if m.higher_is_better else -1.0  # worse: lower, or higher for a loss
        if max(sign * m.ci_low, sign * m.ci_high) < 0:
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
