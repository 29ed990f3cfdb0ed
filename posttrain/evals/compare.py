"""An experiment's comparison: which arm is best on the metric it is judged by, and is the
lead real?

Each arm was evaluated as a group of seeds against the base (posttrain.evals.evaluation), on
the same held-out tasks. Here the arms meet: per task, each arm's score is the mean over its
seeds' trained passes; the best arm (by the sweep's metric and goal) is paired with every
other arm task by task. Each difference gets a bootstrap interval and a sign-flip p-value,
the p-values are Holm-corrected for the number of comparisons, and the difference must clear
the noise: the larger of the evaluation's own floor (between base passes) and the two arms'
training noise (each arm's seed floor, combined in quadrature). Only an arm behind the best
on every count is "behind beyond noise"; the experiment names a best arm only when every
other arm is.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals import stats
from posttrain.evals.evaluation import EvalResult
from posttrain.runs.layout import read_json, write_json_atomic

COMPARISON = "evaluations/experiment.json"  # in each compared run: its experiment's latest


class Difference(BaseModel):
    """The best arm minus this arm, on the ranked metric, oriented so positive is better."""

    delta: float = Field(description="Mean over tasks of best - this arm (sign: the goal).")
    ci_low: float
    ci_high: float
    p_value: float = Field(description="Sign-flip test of the paired per-task differences.")
    p_holm: float = Field(description="p_value after Holm's correction over the comparisons.")
    floor: float = Field(description="The noise the delta must clear: evaluation or training.")
    beyond_noise: bool


class ArmResult(BaseModel):
    rank: int = Field(description="1: the best by the metric (ties keep the sweep's order).")
    arm: str
    overrides: dict[str, Any]
    runs: list[str]
    seeds: int
    mean: float = Field(description="The metric: mean over tasks of the seeds' trained mean.")
    seed_means: list[float] = Field(description="Each seed's trained mean.")
    seed_floor: float = Field(description="Training noise: half-width of the seeds' interval.")
    vs_base: dict[str, Any] = Field(
        description="The arm against the base: delta, interval, verdict (as evaluate)."
    )
    vs_best: Difference | None = Field(None, description="None for the best arm itself.")
    unoptimised: dict[str, str] = Field(
        default_factory=dict, description="Each un-optimised metric's verdict against base."
    )


class ExperimentResult(BaseModel):
    experiment_id: str
    metric: str
    goal: str
    verdict: str = Field(
        description="best_beyond_noise (ARM), tied_within_noise (ARMS) or insufficient_data "
        "(too few tasks, or a metric constant in an arm), "
        "prefixed unproven: with its reasons (few tasks, few seeds, the training reward)."
    )
    best: str | None = Field(None, description="The best arm, named only beyond noise.")
    arms: list[ArmResult] = Field(description="Ranked best first.")
    tasks_used: int
    noise_floor: float = Field(description="The evaluation's own noise on the metric.")
    caveats: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest p times (m - i), kept monotone."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def compare(
    experiment_id: str,
    arms: list[tuple[str, dict[str, Any], EvalResult]],
    metric: str = "reward",
    goal: str = "maximize",
    seed: int = 0,
) -> ExperimentResult:
    """Rank the arms (name, overrides, the arm's evaluation) and test the best's lead."""
    if len(arms) < 2:
        raise ConfigError("an experiment's comparison needs at least two arms")
    first = arms[0][2]
    for name, _, result in arms[1:]:
        if result.task_prompts != first.task_prompts:
            raise ConfigError(
                f"arm {name} was evaluated on other held-out tasks than arm {arms[0][0]} (the "
                f"sweep changed the data or its split), so the arms cannot be paired; compare "
                f"each arm with its base (evaluate one arm's runs)"
            )
    if metric not in first.task_values:
        known = sorted(first.task_values)
        raise ConfigError(
            f"sweep.metric '{metric}' was not measured per task; the arms can be ranked by {known}"
        )
    sign = 1.0 if goal == "maximize" else -1.0
    per_task = {  # arm -> [task] mean over its seeds
        name: [statistics.fmean(col) for col in zip(*r.task_values[metric], strict=True)]
        for name, _, r in arms
    }
    means = {name: statistics.fmean(v) for name, v in per_task.items()}
    order = sorted(range(len(arms)), key=lambda i: -sign * means[arms[i][0]])  # stable
    best_name = arms[order[0]][0]
    floors = {name: _metric(r, metric).seed_floor for name, _, r in arms}
    noise = max(_metric(r, metric).noise_floor for _, _, r in arms)
    raw: dict[str, tuple[float, tuple[float, float], float, float]] = {}
    for name, _, _ in arms:
        if name == best_name:
            continue
        d = [sign * (b - o) for b, o in zip(per_task[best_name], per_task[name], strict=True)]
        floor = max(noise, math.hypot(floors[best_name], floors[name]))
        raw[name] = (
            statistics.fmean(d),
            stats.bootstrap_ci(d, seed=seed),
            stats.sign_flip_p(d, seed=seed),
            floor,
        )
    names = list(raw)
    adjusted = dict(zip(names, holm([raw[n][2] for n in names]), strict=True))
    results = []
    for rank, i in enumerate(order, start=1):
        name, overrides, r = arms[i]
        m = _metric(r, metric)
        vs_best = None
        if name in raw:
            delta, ci, p, floor = raw[name]
            vs_best = Difference(
                delta=delta,
                ci_low=ci[0],
                ci_high=ci[1],
                p_value=p,
                p_holm=adjusted[name],
                floor=floor,
                beyond_noise=ci[0] > 0 and delta > floor and adjusted[name] < stats.ALPHA,
            )
        results.append(
            ArmResult(
                rank=rank,
                arm=name,
                overrides=overrides,
                runs=r.runs,
                seeds=r.training_seeds,
                mean=means[name],
                seed_means=[statistics.fmean(v) for v in r.task_values[metric]],
                seed_floor=floors[name],
                vs_base={
                    "delta": m.delta,
                    "ci": [m.ci_low, m.ci_high],
                    "noise_floor": m.noise_floor,
                    "verdict": m.verdict,
                },
                vs_best=vs_best,
                unoptimised={u.name: u.verdict for u in r.unoptimised},
            )
        )
    behind = [a for a in results if a.vs_best is not None]
    seeds = min(r.training_seeds for _, _, r in arms)
    tasks = first.tasks_used
    degenerate = [name for name, _, r in arms if _metric(r, metric).degenerate]
    if tasks < stats.MIN_TASKS_ANY or degenerate:  # a constant metric ranks nothing
        outcome, best = "insufficient_data", None
    elif all(a.vs_best and a.vs_best.beyond_noise for a in behind):
        outcome, best = f"best_beyond_noise ({best_name})", best_name
    else:
        tied = [a.arm for a in behind if not (a.vs_best and a.vs_best.beyond_noise)]
        outcome, best = f"tied_within_noise ({', '.join([best_name, *tied])})", None
    caveats = []
    if tasks < stats.MIN_TASKS_PROVEN:
        caveats.append(f"n={tasks} tasks < {stats.MIN_TASKS_PROVEN}")
    if seeds < 2:
        caveats.append("one training seed per arm: training noise is not measured")
    elif seeds < 3:
        caveats.append(f"{seeds} training seeds per arm < 3")
    if metric == "reward":
        caveats.append("the metric is the training reward itself")
    verdict = outcome
    if caveats and outcome != "insufficient_data":
        verdict = f"unproven: {outcome} ({'; '.join(caveats)})"
    return ExperimentResult(
        experiment_id=experiment_id,
        metric=metric,
        goal=goal,
        verdict=verdict,
        best=best,
        arms=results,
        tasks_used=tasks,
        noise_floor=noise,
        caveats=caveats,
        warnings=list(dict.fromkeys(w for _, _, r in arms for w in r.warnings)),  # said once
    )


def _metric(result: EvalResult, name: str) -> Any:
    for m in result.metrics + result.unoptimised:
        if m.name == name:
            return m
    raise ConfigError(f"metric '{name}' is not in the evaluation of {result.run_id}")


def store_comparison(run_dirs: list[Any], result: ExperimentResult) -> None:
    """Keep the comparison with every run it compared (the latest replaces the one before)."""
    for run_dir in run_dirs:
        write_json_atomic(run_dir / COMPARISON, result.model_dump(mode="json"))


def stored_comparison(run_dir: Any) -> dict[str, Any] | None:
    """The latest comparison a run was part of, or None."""
    path = run_dir / COMPARISON
    return read_json(path) if path.is_file() else None
