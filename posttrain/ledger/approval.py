"""Who approves a spend, and what the human is asked: decided here, once, for launches,
smoke runs on Modal and evaluations on Modal alike.

Who approves, in order: nobody for a free (local) run; the policy for a worst case at or
under the auto-approve amount; a confirmation token the human's agent hands back; the human,
asked directly (MCP elicitation, or a terminal prompt). When nobody can be asked, the answer
is `needs_confirmation` with a token bound to this spend and cost. Hard caps refuse a spend
whatever was approved, before anyone is asked.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.pricing.cost import price_text
from posttrain.pricing.eval_cost import judge_words

if TYPE_CHECKING:
    from posttrain.spec.eval_plan import EvalPlan
    from posttrain.spec.run_plan import RunPlan

Decision = Literal["approved", "declined"] | None  # None: no human could be asked
EXPLICIT_KEY_TTL_S = 24 * 3600


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
    checked (and consumed) later, in the same transaction that reserves the spend."""
    approved_by = who_approves(worst_case_usd, token, policy)
    if approved_by is not None:
        return "approved", approved_by, None
    ledger.check_caps(policy, worst_case_usd)
    if human == "declined":
        return "declined", None, None
    if human == "approved":
        return "approved", "human", None
    return "needs_confirmation", None, ledger.issue_token(spend_id, worst_case_usd)


def unapproved(
    outcome: str, token: tuple[str, float] | None, asked: str, again: str, nothing: str
) -> dict[str, Any] | None:
    """The result fields of a spend that stops at its approval (declined, or waiting for the
    human with a token), or None when `decide` approved it. `asked` is the question, `again`
    how to call back with the token, `nothing` what did not happen ("was started")."""
    if outcome == "declined":
        return {"status": "declined", "message": f"the human declined: nothing {nothing}"}
    if outcome == "needs_confirmation":
        assert token is not None
        return {
            "status": "needs_confirmation",
            "confirmation_token": token[0],
            "token_expires_at": token[1],
            "message": f"{asked} Ask your human; if they approve, call {again}",
        }
    return None


def needs_asking(worst_case_usd: float, token: str | None) -> bool:
    """Whether a human must decide this spend (and it is not refused by a cap anyway)."""
    policy = BudgetPolicy.load()
    if who_approves(worst_case_usd, token, policy):
        return False
    try:
        Ledger().check_caps(policy, worst_case_usd)
    except Exception:
        return False  # refused whatever the human says: do not ask
    return True


def still_counts(ctx: Any, run_id: str, explicit: bool) -> bool:
    """Whether the run an earlier launch with a key started still holds the key: an explicit
    key holds for 24 h unless its run failed or was cancelled; the default key (the spec id)
    holds while its run is live, so a finished spec can be run again. A run whose processes
    still live holds its key whatever its status says: one key never starts a second run
    beside a first that is still working."""
    if not (ctx.root / run_id).is_dir():
        return False
    ctx.refresh(run_id)
    row = ctx.index.get(run_id)
    if row is None:
        return True  # its folder exists but the index has not read it yet: it is live
    backend = ctx.backends.get(row.backend_name)
    if backend is not None and backend.leftover(ctx.root / run_id):
        return True
    if explicit:
        fresh = (row.created_at or 0) > time.time() - EXPLICIT_KEY_TTL_S
        return fresh and row.status not in ("failed", "cancelled")
    return not row.is_final


def existing_run(ctx: Any, plan: RunPlan) -> str | None:
    """The run that already holds the plan's key, if it still counts."""
    run_id = Ledger().existing(plan.key)
    return run_id if run_id and still_counts(ctx, run_id, plan.explicit_key) else None


def question(plan: RunPlan) -> str:
    """What the human is asked about a launch: the price told as `plan` tells it, the
    timeout's stop first when it would stop the run."""
    spec, cost = plan.spec, plan.cost
    gpu = cost.gpu if cost.gpu_count == 1 else f"{cost.gpu_count}x {cost.gpu}"
    what = f"{spec.model.name} ({spec.algorithm.kind}, {spec.algorithm.steps} steps)"
    price = price_text(cost, spec.algorithm.steps)
    if cost.stop_step is not None:
        asked = (
            f"{price} Launch {what} on {gpu} anyway, to be stopped at step {cost.stop_step}, "
            f"for at most ${cost.worst_case_usd:.2f}?"
        )
    else:
        asked = f"Launch {what} on {gpu} for up to {cost.timeout_s / 60:.0f} min: {price}?"
    return f"{asked} {plan.dry_run_status or ''}".rstrip()


def evaluation_question(plan: EvalPlan) -> str:
    """What the human is asked about an evaluation: its runs, where they generate and for
    how long, a paid judge's share, and the most it can cost (all as the plan priced it)."""
    cost = plan.cost
    runs = len(plan.runs)
    what = f"the {runs} runs of {plan.names} {plan.run_id}" if runs > 1 else plan.run_id
    where = (
        f"on Modal ({cost.gpu}, base and trained passes on the held-out tasks) for up to "
        f"{cost.timeout_s // 60} min each"
        if cost.gpu
        else "on this machine"
    )
    judged = f", and {judge_words(cost.judge)}" if cost.judge else ""
    return f"Evaluate {what} {where}{judged}: at most ${cost.worst_case_usd:.2f}?"


def dry_run_status(ctx: Any, spec: Any) -> str:
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
