"""launch and smoke_run: start a run, with a human's approval before any GPU money is spent.

A launch is resolved once into a RunPlan (posttrain.launching.resolve); approval is decided from
it (posttrain.ledger.approval); then the run is reserved in the ledger, submitted to its
backend outside the lock, and recorded (posttrain.runs.backend). The same idempotency key
(default: the spec id) never starts two live runs, however many launches race for it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import BackendError, PosttrainError
from posttrain.launching.groups import GroupPlan, ask_group, launch_group, resolve_group
from posttrain.launching.reserve import create_run, ready_backend
from posttrain.launching.resolve import RunPlan, resolve
from posttrain.launching.sweeps import sweep_of
from posttrain.ledger.approval import (
    Decision,
    decide,
    existing_run,
    needs_asking,
    question,
    still_counts,
    unapproved,
)
from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.reports.run_models import id_kind
from posttrain.runs.backend import submit_and_record
from posttrain.runs.context import Context
from posttrain.runs.run_lock import LaunchLock
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import RunSpec, load_spec
from posttrain.tools.experiments import (
    resolve_experiment,
    resume,
    smoke_experiment,
)

SMOKE_STEPS = 4  # after the proof step


class DryRunPlan(BaseModel):
    """What a local dry run of the user's spec runs on, what it cuts, and what it proves."""

    stand_in: str = Field(description="The stand-in model the spec's model is replaced by.")
    cuts: dict[str, str] = Field(description="Spec fields cut to CPU sizes: 'from -> to (why)'.")
    proves: list[str]
    cannot_prove: list[str]
    judge: str | None = Field(
        None, description="A judge reward: how many requests the dry run sends it, and where."
    )


class LaunchResult(BaseModel):
    status: Literal["started", "existing", "needs_confirmation", "declined"]
    run_id: str | None = None
    spec_id: str
    cost: CostEstimate
    dry_run: DryRunPlan | None = Field(None, description="Set when this is a local dry run.")
    dry_run_status: str | None = Field(
        None, description="For a paid launch: whether this spec passed a dry run, and when."
    )
    approved_by: str | None = Field(None, description="free, policy, token or human.")
    confirmation_token: str | None = Field(
        None, description="Ask your human; if they approve, call again with this token."
    )
    token_expires_at: float | None = None
    group_id: str | None = Field(None, description="Set for a group: one run per seed.")
    run_ids: list[str] = Field(default_factory=list, description="A group's runs, by seed.")
    seeds: list[int] = Field(default_factory=list)
    arms: list[str] = Field(
        default_factory=list, description="An experiment's arm of each run, in run_ids order."
    )
    message: str


def human_question(
    spec: RunSpec | dict[str, Any] | str | RunPlan | GroupPlan,
    confirmation_token: str | None = None,
    idempotency_key: str | None = None,
    ctx: Context | None = None,
    seeds: list[int] | None = None,
) -> str | None:
    """The question to put to the human, or None when this launch needs no one asked (free,
    policy, token, an existing run) or will be refused anyway (over a cap, or its backend
    cannot start: the launch says why at once)."""
    ctx = ctx or Context()
    plan = resolve_launch(spec, seeds, ctx, idempotency_key)
    if isinstance(plan, GroupPlan):
        return ask_group(plan, confirmation_token, ctx)
    if existing_run(ctx, plan):
        return None
    try:
        ready_backend(ctx, plan)
    except PosttrainError:
        return None
    return question(plan) if needs_asking(plan.cost.worst_case_usd, confirmation_token) else None


def resolve_launch(
    spec: RunSpec | dict[str, Any] | str | RunPlan | GroupPlan,
    seeds: list[int] | None,
    ctx: Context,
    key: str | None = None,
    roots: list[Path] | None = None,
) -> RunPlan | GroupPlan:
    """What a launch starts, resolved once: an experiment's runs (a spec with `sweep:`),
    a group's (`seeds`), or one run; with `roots`, every path the spec names must lie inside
    them. An experiment launched before is resumed: only its runs that failed or were
    cancelled start again (checked again at the launch itself, as any key is)."""
    if isinstance(spec, GroupPlan):
        experiment = id_kind(spec.group_id) == "experiment"  # its dry runs never resume
        return resume(spec, ctx) if experiment and not spec.resume_of else spec
    if isinstance(spec, RunPlan):
        return spec
    if found := sweep_of(spec):
        return resume(resolve_experiment(*found, ctx, key, seeds, roots), ctx)
    spec = load_spec(spec, roots)
    if seeds is not None:
        return resolve_group(spec, seeds, ctx, key)
    return resolve(spec, ctx, key)


def launch(
    spec: RunSpec | dict[str, Any] | str | RunPlan | GroupPlan,
    confirmation_token: str | None = None,
    idempotency_key: str | None = None,
    human: Decision = None,
    ctx: Context | None = None,
    seeds: list[int] | None = None,
) -> LaunchResult:
    """Start the run if it is free, within policy, confirmed by token, or approved by the
    human; otherwise say what is needed. Raises BudgetError when a cap refuses it. With
    `seeds`: a group, one run per seed, approved once for the group's total."""
    ctx = ctx or Context()
    plan = resolve_launch(spec, seeds, ctx, idempotency_key)
    if isinstance(plan, GroupPlan):
        return launch_group(plan, confirmation_token, human, ctx, LaunchResult)
    base = {"spec_id": plan.spec_id, "cost": plan.cost, "dry_run_status": plan.dry_run_status}
    if run_id := existing_run(ctx, plan):
        return _existing_result(run_id, base)
    backend = ready_backend(ctx, plan)  # before any token or question: it can start
    ledger, policy = Ledger(), BudgetPolicy.load()
    worst = plan.cost.worst_case_usd
    outcome, approved_by, token = decide(
        plan.spec_id, worst, confirmation_token, human, policy, ledger
    )
    again = (
        "launch again with this spec and confirmation_token (valid 15 minutes, for this "
        "exact spec and cost only)"
    )
    if stop := unapproved(outcome, token, question(plan) if token else "", again, "was started"):
        return LaunchResult(**base, **stop)
    approved_by = approved_by or "human"
    locks: list[LaunchLock] = []  # held until the run's handle is recorded
    try:
        try:
            reservation = ledger.reserve(
                policy=policy,
                key=plan.key,
                spec_id=plan.spec_id,
                worst_case_usd=worst,
                approved_by=approved_by,
                create=lambda seq: create_run(ctx, plan, seq, approved_by, locks),
                still_counts=lambda run_id: still_counts(ctx, run_id, plan.explicit_key),
                token=confirmation_token if approved_by == "token" else None,
            )
        except sqlite3.OperationalError as exc:
            raise BackendError(
                f"cannot record the launch in {ledger.path}: {exc}; free disk space or make "
                f"{ledger.path.parent} writable; nothing was started"
            ) from None
        if reservation.existing:
            return _existing_result(reservation.run_id, base)
        run_dir = ctx.root / reservation.run_id
        submit_and_record(backend, plan, run_dir, lambda: ledger.release(reservation.run_id))
    finally:
        for lock in locks:
            lock.release()
    ctx.index.sync([reservation.run_id])
    return LaunchResult(
        status="started",
        run_id=reservation.run_id,
        approved_by=approved_by,
        **base,
        message=f"started {reservation.run_id} on {plan.backend}; poll get_run",
    )


def _existing_result(run_id: str, base: dict[str, Any]) -> LaunchResult:
    return LaunchResult(
        status="existing",
        run_id=run_id,
        **base,
        message=f"run {run_id} was already started with this idempotency key; nothing new "
        f"was started",
    )


def smoke_plan(
    spec: RunSpec | dict[str, Any] | str, steps: int = SMOKE_STEPS, backend: str = "local"
) -> tuple[RunSpec, DryRunPlan | None]:
    """The same run cut down to a proof step and `steps` more, tracing every step. Locally,
    a real model's spec becomes its dry run on a stand-in (with the plan of what it cuts and
    proves); tiny-local stays itself, the demo."""
    spec = load_spec(spec)
    data = spec.model_dump(mode="json")
    m = spec.model
    if backend == "local" and not (m.preset is not None and m.preset.hf_repo is None):
        from posttrain.gpu.dryrun import CANNOT_PROVE, EVAL_PROMPTS, PROVES, dry_run_spec
        from posttrain.gpu.standin import stand_in_for

        cut, cuts = dry_run_spec(data, 1 + steps)
        cut["name"] = f"dry run: {spec.name or m.name}"
        dry = load_spec(cut)
        plan = DryRunPlan(
            stand_in=stand_in_for(m.name).described,
            cuts=cuts,
            proves=PROVES,
            cannot_prove=CANNOT_PROVE,
            judge=judge_requests(dry, also=2 * EVAL_PROMPTS),  # evaluate's path, both arms
        )
        return dry, plan
    algorithm = data["algorithm"]
    algorithm.update(
        steps=1 + steps,
        save_every=0,
        traces={"every": 1, "steps": [], "samples": algorithm["traces"]["samples"]},
    )
    if algorithm.get("warmstart"):
        algorithm["warmstart"]["steps"] = min(algorithm["warmstart"]["steps"], 10)
    data["compute"]["backend"] = backend
    data["name"] = f"smoke: {spec.name or spec.model.name}"
    return load_spec(data), None


def judge_requests(spec: RunSpec, also: int = 0) -> str | None:
    """What a run of this spec asks its judge (and `also` requests more), bounded and said
    before it starts: None without a judge reward."""
    if spec.reward is None or spec.reward.name != "judge" or not algorithm_of(spec).rewarded:
        return None
    from posttrain.rewards.judge.price import judge_cost
    from posttrain.rewards.registry import get_reward

    reward = get_reward(spec.reward.name, spec.reward.params)
    cost = judge_cost(reward, spec.algorithm, spec.algorithm.steps)
    calls = cost.calls + also
    price = "free" if reward.free else f"at most ${cost.worst_case_usd:.2f}, in the approval"
    return (
        f"{calls} requests to the judge at {reward.base_url} ({reward.mode} mode; at most "
        f"{2 * calls} with retries, fewer with cache hits; {price})"
    )


def smoke_resolve(
    spec: RunSpec | dict[str, Any] | str,
    steps: int = SMOKE_STEPS,
    backend: str = "local",
    ctx: Context | None = None,
) -> tuple[RunPlan, DryRunPlan | None]:
    """The smoke run's plan (and, locally, what its dry run cuts and proves), resolved once
    for the question to the human and the launch alike."""
    cut, dry = smoke_plan(spec, steps, backend)
    return resolve(cut, ctx or Context()), dry


def with_dry_run(result: LaunchResult, dry: DryRunPlan | None) -> LaunchResult:
    """A smoke run's result, saying what its dry run cuts and cannot prove."""
    if dry is not None:
        result.dry_run = dry
        result.message += (
            f"; a dry run of your spec on a {dry.stand_in}: it proves the plumbing, not "
            f"learning (cuts: {', '.join(dry.cuts) or 'none'})"
        )
        if dry.judge:
            result.message += f"; it sends {dry.judge}"
    return result


def smoke_run(
    spec: RunSpec | dict[str, Any] | str,
    steps: int = SMOKE_STEPS,
    backend: str = "local",
    confirmation_token: str | None = None,
    human: Decision = None,
    ctx: Context | None = None,
) -> LaunchResult:
    """A proof step then a few steps of the same spec (local and free by default; locally, a
    real model's spec runs as its dry run on a stand-in; an experiment, one per distinct spec
    its arms make)."""
    ctx = ctx or Context()
    plan, dry = smoke_resolve_any(spec, steps, backend, ctx)
    result = launch(plan, confirmation_token=confirmation_token, human=human, ctx=ctx)
    return with_dry_run(result, dry)


def smoke_resolve_any(
    spec: RunSpec | dict[str, Any] | str,
    steps: int = SMOKE_STEPS,
    backend: str = "local",
    ctx: Context | None = None,
    roots: list[Path] | None = None,
) -> tuple[RunPlan | GroupPlan, DryRunPlan | None]:
    """smoke_resolve, or for an experiment the group of its distinct arms' smoke runs;
    with `roots`, every path the spec names must lie inside them."""
    ctx = ctx or Context()
    if found := sweep_of(spec):
        return smoke_experiment(
            *found, lambda one: smoke_plan(one, steps, backend), ctx, roots
        )  # fmt: skip
    return smoke_resolve(load_spec(spec, roots), steps, backend, ctx)
