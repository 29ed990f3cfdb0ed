"""launch and smoke_run: start a run, with a human's approval before any GPU money is spent.

Who approves, in order: nobody for a free (local) run; the policy for a worst case at or
under the auto-approve amount; a confirmation token the human's agent hands back; the human,
asked directly (MCP elicitation, or a terminal prompt). When nobody can be asked, the result
is `needs_confirmation` with a token bound to this spec and cost. Hard caps refuse a launch
whatever was approved. The same idempotency key (default: the spec id) never starts two
live runs.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.errors import BackendError, ConfigError, PosttrainError
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.spec import RunSpec, load_spec
from posttrain.tools.budget import BudgetPolicy, Ledger
from posttrain.tools.context import Context
from posttrain.tools.plan import CostEstimate, estimate
from posttrain.tools.runs import check_data

Decision = Literal["approved", "declined"] | None  # None: no human could be asked

SMOKE_STEPS = 4  # after the proof step
EXPLICIT_KEY_TTL_S = 24 * 3600


class DryRunPlan(BaseModel):
    """What a local dry run of the user's spec runs on, what it cuts, and what it proves."""

    stand_in: str = Field(description="The stand-in model the spec's model is replaced by.")
    cuts: dict[str, str] = Field(description="Spec fields cut to CPU sizes: 'from -> to (why)'.")
    proves: list[str]
    cannot_prove: list[str]


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
    message: str


def question(spec: RunSpec, cost: CostEstimate, dry_run: str) -> str:
    """What the human is asked."""
    minutes = cost.timeout_s / 60
    gpu = cost.gpu if cost.gpu_count == 1 else f"{cost.gpu_count}x {cost.gpu}"
    timeout = f" It is {cost.timeout_note}." if cost.timeout_note else ""
    return (
        f"Launch {spec.model.name} ({spec.algorithm.kind}, {spec.algorithm.steps} steps) on "
        f"{gpu} for up to {minutes:.0f} min: estimated ${cost.expected_usd:.2f} (up to "
        f"${cost.expected_high_usd:.2f}), at most ${cost.worst_case_usd:.2f}?{timeout} "
        f"{dry_run}"
    )


def dry_run_status(ctx: Context, spec: RunSpec) -> str:
    """Whether this spec (model, data, template, reward, algorithm) passed a local dry run."""
    found = ctx.index.last_dry_run(spec.dry_run_key)
    if found is None:
        return (
            "Dry run: none has passed for this model, data, reward and algorithm; "
            "`smoke_run` locally first is free."
        )
    ago = max(0.0, time.time() - (found["ended_at"] or time.time()))
    when = f"{ago / 60:.0f} min ago" if ago < 7200 else f"{ago / 3600:.0f} h ago"
    return f"Dry run: passed {when} ({found['run_id']})."


def refuse_local_weights(spec: RunSpec) -> None:
    """A local run trains tiny-local or a stand-in; a real model's weights never load here."""
    m = spec.model
    if spec.compute.backend != "local" or m.stand_in or m.random_weights:
        return
    if m.preset is not None and m.preset.hf_repo is None:
        return  # tiny-local, the demo
    raise ConfigError(
        f"compute.backend 'local' would load {m.name}'s real weights onto this machine's CPU; "
        f"locally, posttrain dry-runs your spec on a stand-in of the same family instead "
        f"(`smoke_run`, or `posttrain smoke SPEC`: free, about a minute). To train "
        f"{m.name} itself, set compute.backend: modal"
    )


def _existing(ctx: Context, ledger: Ledger, key: str, explicit: bool) -> str | None:
    """The run an earlier launch with this key started, if it still counts: an explicit key
    holds for 24 h unless its run failed or was cancelled; the default key (the spec id)
    holds while its run is live, so a finished spec can be run again."""
    run_id = ledger.existing(key)
    if run_id is None:
        return None
    ctx.refresh(run_id) if (ctx.root / run_id).is_dir() else None
    row = ctx.index.get(run_id)
    if row is None:
        return None
    if explicit:
        fresh = (row["created_at"] or 0) > time.time() - EXPLICIT_KEY_TTL_S
        return run_id if fresh and row["status"] not in ("failed", "cancelled") else None
    return run_id if row["status"] not in FINAL_STATUSES else None


def who_approves(worst_case_usd: float, token: str | None, policy: BudgetPolicy) -> str | None:
    """free, policy or token when no human needs asking; None when a human must decide."""
    if worst_case_usd <= 0:
        return "free"
    if worst_case_usd <= policy.auto_approve_usd:
        return "policy"
    if token:
        return "token"
    return None


def decide(
    spend_id: str,
    worst_case_usd: float,
    token: str | None,
    human: Decision,
    policy: BudgetPolicy,
    ledger: Ledger,
) -> tuple[str, str | None, tuple[str, float] | None]:
    """("approved", who, None), ("declined", None, None) or ("needs_confirmation", None,
    (token, expires)). Over-cap spends raise BudgetError before anyone is asked; a token is
    checked (and consumed) later, in the same transaction that starts the work."""
    approved_by = who_approves(worst_case_usd, token, policy)
    if approved_by is not None:
        return "approved", approved_by, None
    ledger.check_caps(policy, worst_case_usd)
    if human == "declined":
        return "declined", None, None
    if human == "approved":
        return "approved", "human", None
    return "needs_confirmation", None, ledger.issue_token(spend_id, worst_case_usd)


def human_question(
    spec: RunSpec | dict[str, Any] | str,
    confirmation_token: str | None = None,
    idempotency_key: str | None = None,
    ctx: Context | None = None,
) -> str | None:
    """The question to put to the human, or None when this launch needs no one asked (free,
    policy, token, an existing run) or will be refused anyway (over a cap)."""
    ctx = ctx or Context()
    spec = load_spec(spec)
    ledger, policy = Ledger(), BudgetPolicy.load()
    if _existing(ctx, ledger, idempotency_key or spec.spec_id, idempotency_key is not None):
        return None
    try:
        ready_backend(ctx, spec)
    except PosttrainError:
        return None  # it cannot start: the launch says why at once, nobody is asked
    cost = estimate(spec, ctx.index)
    if who_approves(cost.worst_case_usd, confirmation_token, policy):
        return None
    try:
        ledger.check_caps(policy, cost.worst_case_usd)
    except Exception:
        return None  # refused whatever the human says: do not ask
    return question(spec, cost, dry_run_status(ctx, spec))


def launch(
    spec: RunSpec | dict[str, Any] | str,
    confirmation_token: str | None = None,
    idempotency_key: str | None = None,
    human: Decision = None,
    ctx: Context | None = None,
) -> LaunchResult:
    """Start the run if it is free, within policy, confirmed by token, or approved by the
    human; otherwise say what is needed. Raises BudgetError when a cap refuses it."""
    ctx = ctx or Context()
    spec = load_spec(spec)
    refuse_local_weights(spec)
    check_data(spec)
    ledger, policy = Ledger(), BudgetPolicy.load()
    key = idempotency_key or spec.spec_id
    cost = estimate(spec, ctx.index)
    paid = cost.worst_case_usd > 0
    base = {
        "spec_id": spec.spec_id,
        "cost": cost,
        "dry_run_status": dry_run_status(ctx, spec) if paid else None,
    }
    if run_id := _existing(ctx, ledger, key, idempotency_key is not None):
        return LaunchResult(
            status="existing",
            run_id=run_id,
            **base,
            message=f"run {run_id} was already started with this idempotency "
            f"key; nothing new was started",
        )
    backend = ready_backend(ctx, spec)  # before any token or question: it can start
    outcome, approved_by, token = decide(
        spec.spec_id, cost.worst_case_usd, confirmation_token, human, policy, ledger
    )
    if outcome == "declined":
        return LaunchResult(
            status="declined", **base, message="the human declined: nothing was started"
        )
    if outcome == "needs_confirmation":
        assert token is not None
        return LaunchResult(
            status="needs_confirmation",
            **base,
            confirmation_token=token[0],
            token_expires_at=token[1],
            message=f"{question(spec, cost, base['dry_run_status'])} Ask your human; if they "
            f"approve, call launch "
            f"again with this spec and confirmation_token (valid 15 minutes, for "
            f"this exact spec and cost only)",
        )

    run_id = record_and_start(
        ledger,
        policy=policy,
        spec_id=spec.spec_id,
        worst_case_usd=cost.worst_case_usd,
        approved_by=approved_by or "human",
        key=key,
        token=confirmation_token if approved_by == "token" else None,
        start=lambda: backend.start(
            spec,
            idempotency_key=key,
            approved_by=approved_by,
            worst_case_usd=cost.worst_case_usd,
            expected_usd=cost.expected_usd,
            expected_s=cost.expected_s,
            step_s=cost.step_s,
        ),
    )
    ctx.index.sync([run_id])
    return LaunchResult(
        status="started",
        run_id=run_id,
        approved_by=approved_by,
        **base,
        message=f"started {run_id} on {spec.compute.backend}; poll get_run",
    )


def ready_backend(ctx: Context, spec: RunSpec) -> Any:
    """The spec's backend, once it says it can start a run now (Modal: a token is configured;
    no network needed): a launch that cannot start fails here, before anyone approves it."""
    backend = ctx.backends.get(spec.compute.backend)
    if backend is None:
        raise ConfigError(
            f"compute.backend '{spec.compute.backend}' is not available here; "
            f"use backend 'local' for a free run on this machine"
        )
    backend.ready()
    return backend


def record_and_start(ledger: Ledger, **kwargs: Any) -> str:
    """Ledger.reserve_and_start, with a full or read-only disk reported as such."""
    try:
        return ledger.reserve_and_start(**kwargs)
    except sqlite3.OperationalError as exc:
        raise BackendError(
            f"cannot record the launch in {ledger.path}: {exc}; free disk space or make "
            f"{ledger.path.parent} writable; nothing was started"
        ) from None


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
        from posttrain.gpu.dryrun import CANNOT_PROVE, PROVES, dry_run_spec
        from posttrain.gpu.standin import stand_in_for

        cut, cuts = dry_run_spec(data, 1 + steps)
        cut["name"] = f"dry run: {spec.name or m.name}"
        plan = DryRunPlan(
            stand_in=stand_in_for(m.name).described,
            cuts=cuts,
            proves=PROVES,
            cannot_prove=CANNOT_PROVE,
        )
        return load_spec(cut), plan
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


def smoke_spec(
    spec: RunSpec | dict[str, Any] | str, steps: int = SMOKE_STEPS, backend: str = "local"
) -> RunSpec:
    return smoke_plan(spec, steps, backend)[0]


def smoke_run(
    spec: RunSpec | dict[str, Any] | str,
    steps: int = SMOKE_STEPS,
    backend: str = "local",
    confirmation_token: str | None = None,
    human: Decision = None,
    ctx: Context | None = None,
) -> LaunchResult:
    """A proof step then a few steps of the same spec (local and free by default; locally, a
    real model's spec runs as its dry run on a stand-in)."""
    cut, plan = smoke_plan(spec, steps, backend)
    result = launch(cut, confirmation_token=confirmation_token, human=human, ctx=ctx)
    if plan is not None:
        result.dry_run = plan
        result.message += (
            f"; a dry run of your spec on a {plan.stand_in}: it proves the plumbing, not "
            f"learning (cuts: {', '.join(plan.cuts) or 'none'})"
        )
    return result
