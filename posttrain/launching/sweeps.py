"""What plan and an experiment's launch share: a spec's sweep read and checked, its arms
validated as whole specs, and a price summed over runs.

Below both plan.py and experiments.py, so `plan` can price an experiment arm by arm and the
launch can resolve the same arms, without either importing the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

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
    invalid one is refused by name."""
    return [
        (arm, checked(arm, lambda arm=arm: load_spec(arm.spec, roots))) for arm in arms(base, sweep)
    ]


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


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
