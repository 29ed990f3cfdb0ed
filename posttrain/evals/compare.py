"""An experiment's comparison: which arm is best on the metric it is judged by, and is the
lead real?

Each arm was evaluated as a group of seeds against the base (posttrain.evals.evaluation), on
the same held-out tasks. Here the arms meet, through the one comparison every verdict uses
(posttrain.evals.paired): each arm is a seeds x tasks matrix of its trained means; the
training seeds' variance is pooled across the arms (trained alike, so one estimate with
every arm's degrees of freedom); the leader (by the sweep's metric and goal) is paired with
every other arm task by task. The leader is named best only when its 95% interval against
each other arm lies above zero: among arms equal in truth, one is named at most 5% of the
time (bench/calibration.py measures it).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals import paired, stats
from posttrain.evals.comparison import METHOD
from posttrain.evals.evaluation import EvalResult
from posttrain.runs.layout import read_json, write_json_atomic

COMPARISON = "evaluations/experiment.json"  # in each compared run: its experiment's latest


class Difference(BaseModel):
    """The best arm minus this arm, on the ranked metric, oriented so positive is better."""

    delta: float = Field(description="Mean over tasks of best - this arm (sign: the goal).")
    ci_low: float
    ci_high: float
    se: float = Field(description="Its standard error: tasks, samples and both arms' seeds.")
    df: float = Field(description="Its degrees of freedom (Satterthwaite).")
    p_value: float = Field(description="Two-sided, of the t statistic.")
    beyond_noise: bool = Field(description="The interval lies above zero.")


class ArmResult(BaseModel):
    rank: int = Field(description="1: the best by the metric (ties keep the sweep's order).")
    arm: str
    overrides: dict[str, Any]
    runs: list[str]
    seeds: int
    mean: float = Field(description="The metric: mean over tasks of the seeds' trained mean.")
    seed_means: list[float] = Field(description="Each seed's trained mean.")
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
        "prefixed unproven: with its reasons (few tasks, one seed, the training reward)."
    )
    best: str | None = Field(None, description="The best arm, named only beyond noise.")
    arms: list[ArmResult] = Field(description="Ranked best first.")
    tasks_used: int
    seed_sd: float = Field(
        0.0, description="The training seeds' sd, pooled across the arms (0: not measured)."
    )
    method: str = METHOD
    caveats: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def compare(
    experiment_id: str,
    arms: list[tuple[str, dict[str, Any], EvalResult]],
    metric: str = "reward",
    goal: str = "maximize",
) -> ExperimentResult:
    """Rank the arms (name, overrides, the arm's evaluation) and test the best's lead."""
    import numpy as np

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
    matrix = {name: np.array(r.task_values[metric], dtype=float) for name, _, r in arms}
    means = {name: float(m.mean()) for name, m in matrix.items()}
    order = sorted(range(len(arms)), key=lambda i: -sign * means[arms[i][0]])  # stable
    best_name = arms[order[0]][0]
    pool = paired.pooled([paired.spread(m) for m in matrix.values()])
    gaps: dict[str, Difference] = {}
    for name, _, _ in arms:
        if name == best_name:
            continue
        est = paired.difference(matrix[best_name], matrix[name], pool, pool)
        low, high = sorted((sign * est.low, sign * est.high))
        gaps[name] = Difference(
            delta=sign * est.delta,
            ci_low=low,
            ci_high=high,
            se=est.se,
            df=est.df,
            p_value=est.p_value,
            beyond_noise=low > 0,
        )
    results = []
    for rank, i in enumerate(order, start=1):
        name, overrides, r = arms[i]
        m = _metric(r, metric)
        results.append(
            ArmResult(
                rank=rank,
                arm=name,
                overrides=overrides,
                runs=r.runs,
                seeds=r.training_seeds,
                mean=means[name],
                seed_means=[float(v) for v in matrix[name].mean(axis=1)],
                vs_base={"delta": m.delta, "ci": [m.ci_low, m.ci_high], "verdict": m.verdict},
                vs_best=gaps.get(name),
                unoptimised={u.name: u.verdict for u in r.unoptimised},
            )
        )
    seeds = min(r.training_seeds for _, _, r in arms)
    tasks = first.tasks_used
    degenerate = [name for name, _, r in arms if _metric(r, metric).degenerate]
    if tasks < stats.MIN_TASKS_ANY or degenerate:  # a constant metric ranks nothing
        outcome, best = "insufficient_data", None
    elif all(g.beyond_noise for g in gaps.values()):
        outcome, best = f"best_beyond_noise ({best_name})", best_name
    else:
        tied = [name for name, g in gaps.items() if not g.beyond_noise]
        outcome, best = f"tied_within_noise ({', '.join([best_name, *tied])})", None
    caveats = []
    if tasks < stats.MIN_TASKS_PROVEN:
        caveats.append(f"n={tasks} tasks < {stats.MIN_TASKS_PROVEN}")
    if seeds < 2 and pool is None:
        caveats.append("one training seed per arm: training noise is not measured")
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
        seed_sd=math.sqrt(pool.replicate_var) if pool is not None else 0.0,
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
