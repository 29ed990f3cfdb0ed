"""While a run trains: what it has cost, what it will cost, and whether it ends before its
timeout, projected from its own measured seconds per step."""

from __future__ import annotations

import statistics
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.runs.layout import billed_usd_per_s
from posttrain.runs.run_row import RunRow

PROJECTION_WINDOW = 10  # the last steps whose times project the rest
OVER_ESTIMATE = 2.0  # a projection this many times the approved estimate is a health warning


class Projection(BaseModel):
    cost_so_far_usd: float
    s_per_step: float | None = Field(
        None, description="Measured: the median of recent steps of the phase running now."
    )
    steps_left: int
    projected_total_s: float | None = Field(None, description="From launch to the last step.")
    projected_total_usd: float | None = None
    projected_end_at: float | None = Field(None, description="Unix time of the last step.")
    timeout_at: float | None = Field(None, description="When the timeout stops the run.")
    ends_before_timeout: bool | None = None
    approved_expected_usd: float | None = Field(
        None, description="The expected cost the launch was approved with."
    )
    phase: Literal["warmstart", "train"] = Field(
        "train", description="What is running now: the SFT warm-start or the training proper."
    )
    warm_s_per_step: float | None = Field(
        None, description="Warm-start (SFT) seconds a step, measured; None without one."
    )
    train_s_per_step: float | None = Field(
        None, description="Training seconds a step: measured once a step ran, else the plan's."
    )
    train_step_measured: bool = Field(
        False, description="Whether train_s_per_step was measured (else it is the estimate)."
    )
    note: str


def _median_recent(metrics: list[dict[str, Any]], phase: str) -> float | None:
    times = [m["step_time_s"] for m in metrics if m.get("phase") == phase and m.get("step_time_s")]
    recent = times[1:][-PROJECTION_WINDOW:] or times  # the first step carries the set-up
    return statistics.median(recent) if recent else None


def project(
    row: RunRow,
    metrics: list[dict[str, Any]],
    meta: dict[str, Any],
    timeout_s: int | None,
    cost_so_far_usd: float,
    now: float | None = None,
) -> Projection | None:
    """The projection of a live run (None once it has ended)."""
    if row.status not in ("queued", "running"):
        return None
    now = now or time.time()
    start = meta.get("created_at") or row.created_at or now
    usd_per_s = billed_usd_per_s(meta)
    approved = meta.get("expected_usd")
    timeout_at = start + timeout_s if timeout_s else None
    train_s = _median_recent(metrics, "train")
    warm_s = _median_recent(metrics, "warmstart")
    total, step = row.total_steps or 0, row.step
    warm_total = row.warmstart_steps or 0
    warming = row.phase == "warmstart"
    if warming:  # `step` counts warm-start steps; every training step is still to come
        warm_left, train_left = max(0, warm_total - step), total
        per_train = train_s or meta.get("step_s")  # not measured yet: the plan's estimate
        steps_left, s_per_step = warm_left + train_left, warm_s
        left_s = warm_left * (warm_s or 0.0) + train_left * (per_train or 0.0)
    else:
        steps_left, s_per_step, per_train = max(0, total - step), train_s, train_s
        left_s = steps_left * (train_s or 0.0)
    base = {
        "cost_so_far_usd": round(cost_so_far_usd, 4),
        "steps_left": steps_left,
        "timeout_at": timeout_at,
        "approved_expected_usd": approved,
        "phase": "warmstart" if warming else "train",
        "warm_s_per_step": round(warm_s, 3) if warm_s else None,
        "train_s_per_step": round(per_train, 3) if per_train else None,
        "train_step_measured": bool(train_s),
    }
    if not s_per_step:
        return Projection(**base, note="no step measured yet: nothing to project from")
    end_at = now + left_s
    total_s = end_at - start
    projected_usd = round(total_s * usd_per_s, 2)
    before = timeout_at is None or end_at <= timeout_at
    last = time.strftime("%H:%M", time.localtime(end_at))
    if warming:
        then = (
            f"then {total} training steps at {per_train:.2f} s a step "
            f"({'measured' if train_s else 'estimated'})"
            if per_train
            else f"then {total} training steps, not estimated"
        )
        note = (
            f"warm-start step {step} of {warm_total}: {s_per_step:.2f} s a step measured; "
            f"{then}: the last step at about {last}"
        )
    else:
        note = f"{s_per_step:.2f} s a step measured: the last step at about {last}"
    if not before and timeout_at is not None:
        warm_left_s = (warm_total - step) * s_per_step if warming else 0.0
        done = 0 if warming else step
        where = _where_stopped(timeout_at - now, warm_left_s, per_train, done, total)
        note += f"; the timeout stops it first, {where}"
    return Projection(
        **base,
        s_per_step=round(s_per_step, 3),
        projected_total_s=round(total_s, 1),
        projected_total_usd=projected_usd,
        projected_end_at=round(end_at, 1),
        ends_before_timeout=before,
        note=note,
    )


def _where_stopped(
    left_s: float, warm_left_s: float, train_s: float | None, done: int, total: int
) -> str:
    """Where the timeout falls, `left_s` from now: during the `warm_left_s` of warm-start
    still to run, or after it, counting training steps on from `done` of `total`."""
    left_s = max(0.0, left_s)
    if left_s < warm_left_s or not train_s:
        return "during the warm-start, before any training step"
    return f"at about step {min(total, done + int((left_s - warm_left_s) / train_s))} of {total}"


def over_estimate(projection: Projection | None) -> str | None:
    """A health warning when the projected cost passes twice the approved estimate."""
    if projection is None or not projection.projected_total_usd:
        return None
    approved = projection.approved_expected_usd
    if not approved or projection.projected_total_usd <= OVER_ESTIMATE * approved:
        return None
    return (
        f"projected cost ${projection.projected_total_usd:.2f} is over {OVER_ESTIMATE:g}x the "
        f"${approved:.2f} the launch was approved with ({projection.s_per_step:.2f} s a step "
        f"measured); tell your human, and cancel if they say so"
    )


def steps_usd(meta: dict[str, Any], steps: int, container_usd_per_s: float = 0.0) -> float:
    """What `steps` training steps of a run cost at its priced step (run.json's step_s, the
    plan's estimate) and its container's price a second (a run not yet started: the plan's,
    `container_usd_per_s`)."""
    usd_per_s = billed_usd_per_s(meta) or container_usd_per_s
    return round(max(0, steps) * float(meta.get("step_s") or 0.0) * usd_per_s, 4)
