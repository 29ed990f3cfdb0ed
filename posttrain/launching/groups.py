"""Run groups: one spec trained with several seeds, approved once for the group's price.

`launch_group` resolves one plan per seed (the spec with `algorithm.seed` set), asks one
question for the total, reserves every run in one ledger transaction (all or none: a group
never half-starts over a cap), then submits each. Each run's run.json names its group; the
index, list_runs, get_run, the CLI and the dashboard show it, and `evaluate` of a group id
measures the training noise across its seeds (posttrain.evals.evaluation).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import BackendError, ConfigError
from posttrain.launching.reserve import create_run, ready_backend
from posttrain.launching.resolve import RunPlan, resolve
from posttrain.ledger.approval import Decision, decide, needs_asking, still_counts, unapproved
from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.pricing.cost import price_text, total_cost
from posttrain.reports.run_models import GROUP_ID_PREFIX, id_kind
from posttrain.runs.backend import submit_and_record
from posttrain.runs.held import hold, is_held
from posttrain.runs.layout import RUN_META, read_json, write_json_atomic
from posttrain.runs.run_lock import LaunchLock
from posttrain.runs.run_row import RunRow
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import MAX_NAME, RunSpec, load_spec

MAX_SEEDS = 16


class GroupPlan(BaseModel):
    group_id: str
    seeds: list[int]
    plans: list[RunPlan]
    key: str
    explicit_key: bool
    cost: CostEstimate = Field(description="The group's totals: every seed's run.")
    # An experiment's (posttrain.tools.experiments): each plan's arm and its overrides
    arms: list[str] = Field(default_factory=list)
    overrides: list[dict[str, Any]] = Field(default_factory=list)
    metric: dict[str, Any] | None = None
    # An experiment launched again (posttrain.tools.experiments.resume): the runs it keeps,
    # and its arms in the sweep's order (the plans then hold only the runs started again)
    resume_of: str | None = None
    kept: list[str] = Field(default_factory=list)
    arm_order: list[str] = Field(default_factory=list)
    # sweep.max_parallel: at most this many of the experiment's runs at once, the rest held in
    # the ledger and started as earlier ones end (posttrain.runs.held); None: all at once
    max_parallel: int | None = None
    # sweep.early_stop (posttrain.launching.early_stop): the checkpoint's rule, with at_fraction
    # turned into a step for the runs' steps; kept in each run.json
    early_stop: dict[str, Any] | None = None


def new_group_id(prefix: str = GROUP_ID_PREFIX) -> str:
    """A group's id (an experiment's with EXPERIMENT_ID_PREFIX): its time and a few random hex."""
    import secrets

    return time.strftime(f"{prefix}%y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def resolve_group(
    spec: RunSpec | dict[str, Any] | str, seeds: list[int], ctx: Any, key: str | None = None
) -> GroupPlan:
    """One plan per seed, and the group's summed price."""
    seeds = list(dict.fromkeys(int(s) for s in seeds))
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ConfigError(f"seeds: give 1 to {MAX_SEEDS} distinct seeds (got {len(seeds)})")
    spec = load_spec(spec)
    data = spec.model_dump(mode="json")
    plans = []
    for seed in seeds:
        one = {**data, "algorithm": {**data["algorithm"], "seed": seed}}
        suffix = f" (seed {seed})"
        one["name"] = (spec.name or spec.model.name)[: MAX_NAME - len(suffix)] + suffix
        plans.append(resolve(one, ctx))
    group_key = key or f"{spec.spec_id}:seeds={','.join(map(str, seeds))}"
    return GroupPlan(
        group_id=new_group_id(),
        seeds=seeds,
        plans=plans,
        key=group_key,
        explicit_key=key is not None,
        cost=total_cost([p.cost for p in plans]),
    )


def group_question(group: GroupPlan) -> str:
    spec, cost = group.plans[0].spec, group.cost
    gpu = cost.gpu if cost.gpu_count == 1 else f"{cost.gpu_count}x {cost.gpu}"
    steps = spec.algorithm.steps
    price = price_text(cost, steps, runs=len(group.plans))
    seeds = ", ".join(map(str, group.seeds))
    if group.resume_of:
        what = (
            f"again the {len(group.plans)} run(s) of experiment {group.resume_of} that failed "
            f"or were cancelled ({'; '.join(dict.fromkeys(group.arms))}), keeping its "
            f"{len(group.kept)} others, each on {gpu}"
        )
    elif group.arms:
        names = list(dict.fromkeys(group.arms))
        what = (
            f"an experiment of {len(names)} arms x {len(group.seeds)} "
            f"seed{'s' if len(group.seeds) > 1 else ''} = "
            f"{len(group.plans)} runs of {spec.model.name} ({spec.algorithm.kind}, {steps} "
            f"steps; arms {'; '.join(names)}; seeds {seeds}), each on {gpu}"
        )
    else:
        what = (
            f"a group of {len(group.seeds)} runs of {spec.model.name} ({spec.algorithm.kind}, "
            f"{steps} steps, seeds {seeds}), each on {gpu}"
        )
    if cost.stop_step is not None:
        asked = f"{price} Launch {what} anyway, for at most ${cost.worst_case_usd:.2f} in all?"
    else:
        asked = f"Launch {what} for up to {cost.timeout_s / 60:.0f} min: {price}?"
    said = {}  # each distinct dry-run status once; an experiment's arms may differ
    for i, plan in enumerate(group.plans):
        if plan.dry_run_status:
            arm = group.arms[i] if group.arms else None
            said.setdefault(plan.dry_run_status, []).append(arm)
    if len(said) > 1:
        dry = " ".join(
            f"{', '.join(dict.fromkeys(a for a in arms if a))}: {s}" for s, arms in said.items()
        )
    else:
        dry = next(iter(said), "")
    return f"{asked} {dry}".rstrip()


def group_runs(ctx: Any, group_id: str) -> list[str]:
    """The runs of a group, in seed order."""
    ctx.refresh()
    rows = [r for r in ctx.index.list_runs(limit=10_000) if r.group_id == group_id]
    if not rows:
        raise ConfigError(
            f"no {id_kind(group_id)} '{group_id}'; list runs with `posttrain run list`"
        )

    def order(row: RunRow) -> tuple[int, int]:  # an experiment's arms, then seeds
        meta = read_json(ctx.root / row.run_id / RUN_META)
        return meta.get("arm_index", 0), meta.get("seed", 0)

    rows.sort(key=order)
    return [r.run_id for r in rows]


def existing_group(ctx: Any, group: GroupPlan) -> list[str] | None:
    run_id = Ledger().existing(group.key)
    if not run_id or not still_counts(ctx, run_id, group.explicit_key):
        return None
    group_id = read_json(ctx.root / run_id / RUN_META).get("group_id")
    return group_runs(ctx, group_id) if group_id else [run_id]


def launch_group(
    group: GroupPlan,
    confirmation_token: str | None,
    human: Decision,
    ctx: Any,
    result_type: Any,
) -> Any:
    """Start every run of the group, or none; the result lists them."""
    if group.resume_of and not group.plans:  # every run succeeded or is live: keep them
        return result_type(
            status="existing",
            run_id=group.kept[0],
            run_ids=group.kept,
            group_id=group.resume_of,
            spec_id=group.kept[0],
            cost=group.cost,
            seeds=group.seeds,
            message=f"experiment {group.resume_of} was already started with this key and each "
            f"of its arm x seed runs succeeded or is live; nothing new started (a new "
            f"idempotency_key runs it afresh)",
        )
    first = group.plans[0]
    base = {
        "spec_id": first.spec_id,
        "cost": group.cost,
        "dry_run_status": first.dry_run_status,
        "seeds": group.seeds,
        "arms": group.arms,
    }
    # an experiment's runs, or its dry runs (one group of one run per distinct arm)
    kind = id_kind(group.group_id)
    if found := existing_group(ctx, group):
        group_id = read_json(ctx.root / found[0] / RUN_META).get("group_id")
        return result_type(
            status="existing",
            run_id=found[0],
            run_ids=found,
            group_id=group_id,
            **base,
            message=f"{kind} {group_id} was already started with this key; nothing new started",
        )
    backend = ready_backend(ctx, first)
    ledger, policy = Ledger(), BudgetPolicy.load()
    worst = group.cost.worst_case_usd
    spend_id = f"group:{first.spec_id}:{group.key}"
    outcome, approved_by, token = decide(spend_id, worst, confirmation_token, human, policy, ledger)
    asked = group_question(group) if token else ""
    again = "launch again with the same spec, seeds and confirmation_token"
    if stop := unapproved(outcome, token, asked, again, "was started"):
        return result_type(**base, **stop)
    approved_by = approved_by or "human"
    order = iter(enumerate(group.plans))
    locks: dict[str, LaunchLock] = {}  # each run's, held until its handle is recorded
    arm_names = group.arm_order or list(dict.fromkeys(group.arms))

    def create(seq: int) -> str:
        i, plan = next(order)
        made: list[LaunchLock] = []
        run_id = create_run(ctx, plan, seq, approved_by, made)
        locks[run_id] = made[0]
        meta = read_json(ctx.root / run_id / RUN_META)
        meta.update(group_id=group.group_id, seed=plan.spec.algorithm.seed)
        if group.arms:
            meta.update(
                arm=group.arms[i],
                arm_index=arm_names.index(group.arms[i]),
                overrides=group.overrides[i],
                metric=group.metric,
            )
        if group.early_stop:
            meta.update(early_stop=group.early_stop)
        write_json_atomic(ctx.root / run_id / RUN_META, meta)
        if capped:
            hold(ctx.root / run_id, plan, capped)
        return run_id

    # every run held, then as many started as the cap allows (posttrain.runs.held): one path
    # for the first wave and each later one; with no cap (or room for all), none is held
    capped = group.max_parallel
    if capped and not group.resume_of and capped >= len(group.plans):
        capped = None
    failed = []
    try:
        try:
            reservation = ledger.reserve(
                policy=policy,
                key=group.key,
                spec_id=spend_id,
                worst_case_usd=worst,
                approved_by=approved_by,
                create=create,
                still_counts=lambda run_id: still_counts(ctx, run_id, group.explicit_key),
                token=confirmation_token if approved_by == "token" else None,
                runs=len(group.plans),
            )
        except sqlite3.OperationalError as exc:
            raise BackendError(f"cannot record the launch in {ledger.path}: {exc}") from None
        if reservation.existing:  # another launch took the key meanwhile
            found = existing_group(ctx, group) or [reservation.run_id]
            return result_type(
                status="existing",
                run_id=found[0],
                run_ids=found,
                group_id=read_json(ctx.root / found[0] / RUN_META).get("group_id"),
                **base,
                message=f"this {kind} was already started with this key; nothing new started",
            )
        for plan, run_id in zip(group.plans, reservation.run_ids, strict=True):
            if capped:
                locks.pop(run_id).release()
                continue
            try:
                submit_and_record(
                    backend, plan, ctx.root / run_id, lambda r=run_id: ledger.release(r)
                )
            except BackendError as exc:
                failed.append(f"{run_id}: {exc}")
            finally:
                locks.pop(run_id).release()
    finally:
        for lock in locks.values():
            lock.release()
    ctx.index.sync(list(reservation.run_ids))
    queued = ""
    if capped:
        ctx.release = ctx.release or ledger.release
        ctx.refresh()  # starts the first wave: runs.held, as every later refresh does
        waiting = sum(is_held(ctx.root / r) for r in reservation.run_ids)
        queued = (
            f"; {waiting} queued, each starting as an earlier one ends (sweep.max_parallel: "
            f"{capped} at once; any poll of get_run or list_runs starts them, also after a "
            f"restart)"
        )
    started = len(reservation.run_ids) - len(failed)
    if capped:
        started -= waiting
    message = (
        f"started {kind} {group.group_id}: {started} run(s) on {first.backend}{queued}; "
        f"poll get_run"
    )
    if group.resume_of:
        message = (
            f"resumed experiment {group.group_id}: {started} run(s) that failed or were "
            f"cancelled started again on {first.backend} ({'; '.join(dict.fromkeys(group.arms))}),"
            f" {len(group.kept)} kept; poll get_run"
        )
    if failed:
        message += f"; {len(failed)} could not start: {'; '.join(failed)}"
    return result_type(
        status="started",
        run_id=reservation.run_ids[0],
        run_ids=list(reservation.run_ids),
        group_id=group.group_id,
        approved_by=approved_by,
        **base,
        message=message,
    )


def ask_group(group: GroupPlan, confirmation_token: str | None, ctx: Any) -> str | None:
    """The question for the group, or None when nobody needs asking."""
    from posttrain.core.errors import PosttrainError

    if not group.plans or existing_group(ctx, group):  # a resumed experiment with none to redo
        return None
    try:
        ready_backend(ctx, group.plans[0])
    except PosttrainError:
        return None
    return (
        group_question(group)
        if needs_asking(group.cost.worst_case_usd, confirmation_token)
        else None
    )
