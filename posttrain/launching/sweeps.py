"""What plan and an experiment's launch share: a spec's sweep read and checked, its arms
validated as whole specs, and a price summed over runs.

Below both plan.py and experiments.py, so `plan` can price an experiment arm by arm and the
launch can resolve the same arms, without either importing the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.spec.bounds import check_data, read_source
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import RunSpec, load_spec
from posttrain.spec.sweep import Arm, Metric, Sweep, arms, check_keys, split_sweep


class ArmPlan(BaseModel):
    name: str = Field(description="Named by its overrides: `learning_rate=0.001`.")
    overrides: dict[str, Any] = Field(description="The swept spec keys and their values.")
    spec_id: str
    seeds: list[int]
    cost: CostEstimate = Field(description="The arm's price: every seed's run.")
    warnings: list[str] = Field(default_factory=list, description="plan's warnings for the arm.")


class ExperimentPlan(BaseModel):
    arms: list[ArmPlan]
    seeds: list[int]
    runs: int = Field(description="arms x seeds: the runs the experiment starts.")
    metric: Metric = Field(description="What the comparison ranks the arms by.")
    parallel: str = Field(description="How the runs share the machine: queued or side by side.")
    max_parallel: int | None = Field(
        None, description="sweep.max_parallel: at most this many runs at once (None: no cap)."
    )
    waves: int = Field(1, description="How many rounds of runs the cap makes: ceil(runs / cap).")
    wall_time_s: float = Field(
        0.0, description="The experiment's expected wall time: its runs queued through the cap."
    )
    early_stop: str | None = Field(
        None, description="sweep.early_stop in words: when, and what a stopped run saves."
    )


def sweep_of(spec: Any) -> tuple[dict[str, Any], Sweep] | None:
    """The base spec and its sweep when `spec` is an experiment; None for a plain spec."""
    if isinstance(spec, BaseModel):  # a RunSpec, or a plan already resolved
        return None
    data = read_source(spec) if isinstance(spec, str | Path) else spec
    if not isinstance(data, dict) or "sweep" not in data:
        return None
    check_data(data)
    base, sweep = split_sweep(data)
    assert sweep is not None
    check_keys(sweep, RunSpec)
    return base, sweep


def experiment_arms(
    base: dict[str, Any], sweep: Sweep, roots: list[Path] | None = None
) -> list[tuple[Arm, RunSpec]]:
    """Every arm with its validated spec (its paths inside `roots`, when given); the first
    invalid one is refused by name, and an early stop the arms cannot take is refused."""
    built = [
        (arm, checked(arm, lambda arm=arm: load_spec(arm.spec, roots))) for arm in arms(base, sweep)
    ]
    if sweep.early_stop is not None:
        for arm, spec in built:
            checked(arm, lambda spec=spec: check_early_stop(sweep, spec))
    return built


def ranked_metric(sweep: Sweep, specs: list[RunSpec]) -> Metric:
    """What the arms are ranked by: sweep.metric, else the kind's headline metric (the
    reward when the arms are trained on one or evaluate scores one, reference_nll lower
    is better)."""
    if sweep.metric is not None:
        return sweep.metric
    found = {headline_of(spec) for spec in specs}
    if len(found) > 1:
        names = sorted(m.name for m in found)
        raise ConfigError(
            f"spec field 'sweep.metric': the arms' kinds are judged by different metrics "
            f"({names}); name the one to rank them by, e.g. metric: {{name: {names[0]}}}"
        )
    return found.pop()


def headline_of(spec: RunSpec) -> Metric:
    """The metric evaluate's verdict on a run of this spec is about (its headline)."""
    name = algorithm_of(spec).headline_metric
    if name == "reference_nll" and spec.reward is not None:
        name = "reward"  # evaluate measures a rewarded SFT run by its reward
    return Metric(name=name, goal="minimize" if name == "reference_nll" else "maximize")


def check_early_stop(sweep: Sweep, spec: RunSpec) -> None:
    """sweep.early_stop compares the arms' training reward per prompt, read from their
    traces: refused for a kind with no such score, or traces that would not hold it."""
    stop = sweep.early_stop
    assert stop is not None
    unit = algorithm_of(spec)
    if not unit.rewarded:
        raise ConfigError(
            f"spec field 'sweep.early_stop': {unit.title} runs have no per-prompt training "
            f"score to compare (their traces hold no reward; only GRPO arms train on one), so "
            f"no arm could be called behind; remove early_stop, or evaluate the finished arms"
        )
    steps = spec.algorithm.steps
    at = stop.step(steps)
    if at >= steps:
        raise ConfigError(
            f"spec field 'sweep.early_stop': its checkpoint, step {at}, is not before the "
            f"runs' last step ({steps}); give at_step below {steps}, or at_fraction"
        )
    traces = spec.algorithm.traces
    if (
        traces.samples == 0
        or (traces.every == 0 and not traces.steps)
        or (traces.every > stop.span(steps) and not traces.steps)
    ):
        raise ConfigError(
            f"spec field 'algorithm.traces': sweep.early_stop compares the training rewards "
            f"the traces keep over the {stop.span(steps)} steps before step {at}, and traces every "
            f"{traces.every} step(s) x {traces.samples} sample(s) keep none there; set "
            f"traces.every to at most {stop.span(steps)} (and samples above 0), or widen "
            f"sweep.early_stop.window"
        )


def checked(arm: Arm, build: Any) -> Any:
    """build(), with any ConfigError it raises naming the arm and its overrides."""
    try:
        return build()
    except ConfigError as exc:
        keys = ", ".join(f"{k}={v!r}" for k, v in arm.overrides.items())
        raise type(exc)(f"sweep arm '{arm.name}' ({keys}): {exc}; nothing was started") from None


def wall_time_s(run_s: list[float], slots: int) -> float:
    """When the last run ends, each run starting in order as soon as one of `slots` places
    frees (the queue's own rule: posttrain.runs.held)."""
    free_at = [0.0] * max(1, min(slots, len(run_s) or 1))
    for seconds in run_s:
        start = min(free_at)
        free_at[free_at.index(start)] = start + seconds
    return max(free_at)


def parallel_text(backend: str, run_s: list[float], max_parallel: int | None = None) -> str:
    runs = len(run_s)
    if backend == "local":
        capped = f" (sweep.max_parallel {max_parallel}: met, one at a time)" if max_parallel else ""
        return (
            f"local: the {runs} runs queue, one trainer at a time (two trainers on 2 cores are "
            f"far slower than one after the other), so the experiment takes the sum of its runs"
            f", about {_minutes(sum(run_s))}{capped}"
        )
    if max_parallel and max_parallel < runs:
        waves = -(-runs // max_parallel)
        return (
            f"{backend}: at most {max_parallel} of the {runs} runs at once (sweep.max_parallel); "
            f"the rest queue and start as earlier ones end: {waves} waves, about "
            f"{_minutes(wall_time_s(run_s, max_parallel))} of wall time instead of "
            f"{_minutes(max(run_s))}. The price is the same as without the cap: each run is "
            f"billed for its own time, whenever it starts"
        )
    return (
        f"{backend}: the {runs} runs train side by side, so it takes about its longest run, "
        f"{_minutes(max(run_s, default=0.0))}"
    )


def early_stop_text(sweep: Sweep, spec: RunSpec, cost: CostEstimate) -> str | None:
    """What sweep.early_stop will do, and the most one stopped run saves."""
    if sweep.early_stop is None:
        return None
    steps = spec.algorithm.steps
    at, span = sweep.early_stop.step(steps), sweep.early_stop.span(steps)
    saved = (steps - at) * cost.step_s * cost.container_usd_per_s
    return (
        f"at step {at} of {steps}, the arms beyond noise behind the leader on their training "
        f"reward per prompt (steps {at - span + 1}-{at}) stop; each run stopped then saves its "
        f"{steps - at} remaining steps, about ${saved:.2f}, from the price above"
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
