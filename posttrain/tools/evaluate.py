"""evaluate as a verb: local generation in this process; Modal generation costs money, so it
is approved like a launch (policy, token or human) and its worst case counts against the
caps. The result is stored with the run and shown by get_run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.catalog import gpu_prices
from posttrain.errors import ConfigError
from posttrain.evals.evaluate import EvalResult, evaluate_run, store
from posttrain.runs.layout import RUN_META, read_json
from posttrain.tools.approval import Decision, decide, who_approves
from posttrain.tools.budget import BudgetPolicy, Ledger
from posttrain.tools.context import Context

EVAL_TIMEOUT_S = 3600  # the worst case an evaluation on Modal is approved for


class EvaluateOutcome(BaseModel):
    status: Literal["done", "needs_confirmation", "declined"]
    run_id: str
    result: EvalResult | None = None
    worst_case_usd: float = 0.0
    approved_by: str | None = None
    confirmation_token: str | None = Field(
        None, description="Ask your human; if they approve, call again with this token."
    )
    token_expires_at: float | None = None
    message: str


def _check(k: int, base_passes: int, max_tasks: int) -> None:
    if not 1 <= k <= 64 or not 2 <= base_passes <= 10 or not 5 <= max_tasks <= 5000:
        raise ConfigError("k must be 1..64, base_passes 2..10 and max_tasks 5..5000")


def _cost(run_dir: Path) -> tuple[str | None, float]:
    """The GPU an evaluation of this run would use, and its worst-case cost."""
    meta = read_json(run_dir / RUN_META)
    if (meta.get("backend") or "local") == "local":
        return None, 0.0
    gpu = meta.get("gpu") or "H100"
    return gpu, round(EVAL_TIMEOUT_S * gpu_prices()[gpu], 2)


def eval_question(
    run_id: str, confirmation_token: str | None = None, ctx: Context | None = None
) -> str | None:
    """What to ask the human before evaluating on Modal; None when nobody needs asking."""
    ctx = ctx or Context()
    row = ctx.run(run_id)
    gpu, worst = _cost(Path(row["run_dir"]))
    if gpu is None or who_approves(worst, confirmation_token, BudgetPolicy.load()):
        return None
    return (
        f"Evaluate {run_id} on Modal ({gpu}, base and trained passes on its held-out tasks) "
        f"for up to {EVAL_TIMEOUT_S // 60} min: at most ${worst:.2f}?"
    )


def evaluate(
    run_id: str,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    human: Decision = None,
    confirmation_token: str | None = None,
    ctx: Context | None = None,
) -> EvaluateOutcome:
    """Base vs trained on the run's held-out tasks; the verdict is stored with the run."""
    ctx = ctx or Context()
    row = ctx.run(run_id)
    if row["status"] != "succeeded":
        raise ConfigError(f"run {run_id} is {row['status']}; evaluate a run that succeeded")
    _check(k, base_passes, max_tasks)
    run_dir = Path(row["run_dir"])
    gpu, worst = _cost(run_dir)
    approved_by = "free"
    if gpu is not None:
        ledger, policy = Ledger(), BudgetPolicy.load()
        spend_id = f"eval:{run_id}:{k}:{base_passes}:{max_tasks}:{seed}"
        outcome, approved_by, token = decide(
            spend_id, worst, confirmation_token, human, policy, ledger
        )
        if outcome == "declined":
            return EvaluateOutcome(
                status="declined",
                run_id=run_id,
                worst_case_usd=worst,
                message="the human declined: nothing was evaluated",
            )
        if outcome == "needs_confirmation":
            assert token is not None
            return EvaluateOutcome(
                status="needs_confirmation",
                run_id=run_id,
                worst_case_usd=worst,
                confirmation_token=token[0],
                token_expires_at=token[1],
                message=f"{eval_question(run_id, None, ctx)} Ask your human; if they approve, "
                f"call evaluate again with this confirmation_token",
            )
        ledger.reserve_spend(
            policy=policy,
            spend_id=spend_id,
            worst_case_usd=worst,
            approved_by=approved_by or "human",
            token=confirmation_token if approved_by == "token" else None,
        )
        generate = ctx.backend(row["backend"]).generator(run_dir, gpu, EVAL_TIMEOUT_S)
    else:
        if not (run_dir / "final").is_dir():
            raise ConfigError(f"run {run_id} has no final model; evaluate a finished run")
        generate = _local_generate(run_dir)
    result = evaluate_run(
        run_dir,
        generate,
        k=k,
        base_passes=base_passes,
        max_tasks=max_tasks,
        threshold=threshold,
        seed=seed,
    )
    store(run_dir, result)
    return EvaluateOutcome(
        status="done",
        run_id=run_id,
        result=result,
        worst_case_usd=worst,
        approved_by=approved_by,
        message=f"{run_id}: {result.verdict}",
    )


def _local_generate(run_dir: Path) -> Any:
    def generate(job: dict[str, Any]) -> dict[str, Any]:
        from posttrain.gpu.generate import generate_job

        return generate_job(run_dir.parent, run_dir.name, job)

    return generate


def dumps(outcome: EvaluateOutcome) -> str:
    return json.dumps(outcome.model_dump(mode="json"), indent=2)
