"""evaluate as a verb: local generation on this machine; Modal generation costs money, so it
is approved like a launch (policy, token or human) and its worst case counts against the
caps. The result is stored with the run and shown by get_run.

An evaluation takes minutes, longer than a client waits on one tool call: `start_evaluate`
approves it and runs it as a detached job (posttrain.jobs.detached), returning its id at once;
`evaluate` runs the same work in this process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals.arm_passes import ArmPasses
from posttrain.evals.compare import ExperimentResult, compare, store_comparison
from posttrain.evals.evaluation import EvalResult, evaluate_runs
from posttrain.evals.history import keep
from posttrain.jobs.detached import JobView, find_job, start_job
from posttrain.launching.resolve_eval import resolve_evaluation
from posttrain.ledger.approval import (
    Decision,
    decide,
    evaluation_question,
    unapproved,
    who_approves,
)
from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, SPEC, read_json
from posttrain.spec.eval_plan import EvalPlan, EvalRun


class EvaluateOutcome(BaseModel):
    status: Literal["started", "done", "needs_confirmation", "declined"] = Field(
        description="started: running as a job (poll get_job with job_id); done: result set."
    )
    run_id: str
    job_id: str | None = Field(None, description="The detached job doing (or that did) it.")
    result: EvalResult | None = None
    experiment: ExperimentResult | None = Field(
        None, description="An experiment's comparison: its arms ranked, with the verdict."
    )
    worst_case_usd: float = 0.0
    approved_by: str | None = None
    confirmation_token: str | None = Field(
        None, description="Ask your human; if they approve, call again with this token."
    )
    token_expires_at: float | None = None
    message: str


def plan_evaluation(
    run_id: str | EvalPlan,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    ctx: Context | None = None,
    judge: dict[str, Any] | None = None,
    roots: list[Path] | None = None,
) -> EvalPlan:
    """What an evaluation measures and costs, resolved once (a plan given is returned)."""
    if isinstance(run_id, EvalPlan):
        return run_id
    options = {"k": k, "base_passes": base_passes, "max_tasks": max_tasks}
    options |= {"threshold": threshold, "seed": seed, "judge": judge, "roots": roots}
    return resolve_evaluation(run_id, ctx or Context(), **options)


def eval_question(plan: EvalPlan, confirmation_token: str | None = None) -> str | None:
    """What to ask the human before an evaluation that costs money (on Modal, or with a
    paid judge); None when nobody needs asking, or the same request is a job already."""
    if who_approves(plan.cost.worst_case_usd, confirmation_token, BudgetPolicy.load()):
        return None
    if find_job("evaluate", plan.request()):
        return None
    return evaluation_question(plan)


def _authorize(
    plan: EvalPlan, human: Decision, confirmation_token: str | None
) -> EvalPlan | EvaluateOutcome:
    """Approve the plan's spend (the GPU on Modal, a paid judge's calls): the plan with who
    approved it, or the outcome that stops here (declined, or a token for the human)."""
    worst = plan.cost.worst_case_usd
    if worst == 0:
        return plan.model_copy(update={"approved_by": "free"})
    ledger, policy = Ledger(), BudgetPolicy.load()
    spend_id = plan.spend_id()
    outcome, approved_by, token = decide(spend_id, worst, confirmation_token, human, policy, ledger)
    asked = evaluation_question(plan) if token else ""
    again = "evaluate again with this confirmation_token"
    if stop := unapproved(outcome, token, asked, again, "was evaluated"):
        return EvaluateOutcome(run_id=plan.run_id, worst_case_usd=worst, **stop)
    ledger.reserve_spend(
        policy=policy,
        spend_id=spend_id,
        worst_case_usd=worst,
        approved_by=approved_by or "human",
        token=confirmation_token if approved_by == "token" else None,
    )
    return plan.model_copy(update={"approved_by": approved_by or "human"})


def evaluate(
    run_id: str | EvalPlan,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    human: Decision = None,
    confirmation_token: str | None = None,
    ctx: Context | None = None,
    progress: Any = None,
    judge: dict[str, Any] | None = None,
) -> EvaluateOutcome:
    """Base vs trained on the held-out tasks of a run, or of every seed of a group, in this
    process; the verdict is stored with each run. `start_evaluate` runs the same detached.
    `judge`: the params of a judge that scores both arms besides the training reward."""
    ctx = ctx or Context()
    plan = plan_evaluation(run_id, k, base_passes, max_tasks, threshold, seed, ctx, judge)
    approved = _authorize(plan, human, confirmation_token)
    if isinstance(approved, EvaluateOutcome):
        return approved
    return run_evaluation(approved, ctx, progress)


def start_evaluate(
    run_id: str | EvalPlan,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    human: Decision = None,
    confirmation_token: str | None = None,
    ctx: Context | None = None,
    judge: dict[str, Any] | None = None,
    roots: list[Path] | None = None,
) -> EvaluateOutcome:
    """Approve and start the evaluation as a detached job; returns at once with its id
    (`status: started`). The same request again is the same job: while it runs, `started`
    with its id; once it succeeded, `done` with its result."""
    ctx = ctx or Context()
    plan = plan_evaluation(run_id, k, base_passes, max_tasks, threshold, seed, ctx, judge, roots)
    job = find_job("evaluate", plan.request())
    if job is None:
        approved = _authorize(plan, human, confirmation_token)
        if isinstance(approved, EvaluateOutcome):
            return approved
        # the plan crosses into the job as one document; the request alone is its key
        extra = {"plan": approved.model_dump(mode="json")}
        job = start_job("evaluate", approved.request(), ctx.root, extra)
    return outcome_of(job)


def outcome_of(job: JobView) -> EvaluateOutcome:
    """What an evaluation job has to say: its result once done, else where it is."""
    if job.status == "succeeded" and job.result:
        return EvaluateOutcome(**{**job.result, "job_id": job.job_id})
    if job.status == "running":
        where = f" ({job.stage}, {job.done}/{job.total})" if job.total else ""
        return EvaluateOutcome(
            status="started",
            run_id=job.run_id or "",
            job_id=job.job_id,
            message=f"evaluating {job.run_id} in job {job.job_id}{where}; poll get_job "
            f"with this job_id for its progress and result",
        )
    raise ConfigError(
        f"evaluation job {job.job_id} {job.status}: {job.error or 'no result'}; evaluate again "
        f"to start a new one"
    )


def run_evaluation(plan: EvalPlan, ctx: Context, progress: Any = None) -> EvaluateOutcome:
    """The evaluation itself, its spend already approved (`plan.approved_by`)."""
    spent = {"approved_by": plan.approved_by, "worst_case_usd": plan.cost.worst_case_usd}
    if plan.names == "experiment":
        return _run_experiment(plan, ctx, progress, spent)
    group_id = plan.run_id if plan.names == "group" else None
    result = _evaluated(plan, plan.runs, group_id, ctx, progress)
    return EvaluateOutcome(
        status="done",
        run_id=plan.run_id,
        result=result,
        message=f"{plan.run_id}: {result.verdict}",
        **spent,
    )


def _evaluated(
    plan: EvalPlan,
    runs: list[EvalRun],
    group_id: str | None,
    ctx: Context,
    progress: Any = None,
    wrap: Callable[[Any], Any] = lambda generate: generate,
) -> EvalResult:
    """These runs evaluated together (a run, a group's seeds, an experiment's arm), each
    where its backend generates, and the result stored with each. `wrap`: around each
    generator (an experiment's arms share their base passes through it)."""
    generators = [
        wrap(ctx.backend(run.backend).generator(run.path, run.gpu, plan.cost.timeout_s))
        for run in runs
    ]
    result = evaluate_runs(
        [run.path for run in runs],
        generators,
        group_id=group_id,
        k=plan.k,
        base_passes=plan.base_passes,
        max_tasks=plan.max_tasks,
        threshold=plan.threshold,
        seed=plan.seed,
        progress=progress,
        judge=plan.judge,
        judge_approved=True,  # the plan's price was approved (_authorize)
    )
    # kept with each run, saying so when they were evaluated before (and how that went)
    return keep([run.path for run in runs], result)


def _run_experiment(
    plan: EvalPlan, ctx: Context, progress: Any, spent: dict[str, Any]
) -> EvaluateOutcome:
    """Each arm evaluated as a group of its seeds on the same held-out tasks, then the arms
    compared (posttrain.evals.compare). Each run keeps its arm's evaluation."""
    arms = plan.arms()
    metric = plan.metric or {}
    name = metric.get("name", "reward")
    report = progress or (lambda done, total, message: None)
    passes = ArmPasses()  # the base passes, generated once for the arms that share a base
    evaluated = []
    for i, (arm, runs) in enumerate(arms.items()):
        shared = " (base passes shared with the first arm)" if passes.base is not None else ""
        report(i, len(arms) + 1, f"evaluating arm {arm} ({len(runs)} run(s)){shared}")
        base = base_identity(runs[0].path)

        def wrap(generate: Any, arm: str = arm, base: str | None = base) -> Any:
            return passes.wrap(arm, generate, base)

        result = _evaluated(plan, runs, f"{plan.run_id} [{arm}]", ctx, wrap=wrap)
        if name not in result.task_values and (values := passes.headline(arm, name)):
            # a deterministic headline (reference_nll, preference accuracy, the KTO signed
            # likelihood): its per-task values, for the arms to be paired on
            result.task_values[name] = values
        evaluated.append((arm, runs[0].overrides, result))
    report(len(arms), len(arms) + 1, "comparing the arms")
    compared = compare(
        plan.run_id,
        evaluated,
        metric=name,
        goal=metric.get("goal", "maximize"),
    )
    if passes.shared_with:
        compared.warnings.insert(
            0,
            f"base passes generated once and shared: arms {', '.join(passes.shared_with)} "
            f"took the first arm's (the same base model, prompts and sampling, so the same "
            f"numbers), saving {len(passes.shared_with)} arm(s)' base generation",
        )
    if plan.skipped:
        compared.warnings.insert(
            0, f"not evaluated, they did not succeed: {', '.join(plan.skipped)}"
        )
    store_comparison([run.path for run in plan.runs], compared)
    return EvaluateOutcome(
        status="done",
        run_id=plan.run_id,
        experiment=compared,
        message=f"{plan.run_id}: {compared.verdict}",
        **spent,
    )


def base_identity(run_dir: Path) -> str | None:
    """What an arm's base model is (its model section, what it resumes from), or None when
    the arm trains a base of its own first (a warm start): its base passes are its own."""
    spec, meta = read_json(run_dir / SPEC), read_json(run_dir / RUN_META)
    if (spec.get("algorithm") or {}).get("warmstart") or (run_dir / "warmstart").is_dir():
        return None
    return json.dumps({"model": spec.get("model"), "base": meta.get("base")}, sort_keys=True)


def job_work(job: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    """The detached job's work (posttrain.jobs.worker), from its job.json: the plan approved
    at the start, as one document."""
    plan = EvalPlan.model_validate(job["extra"]["plan"])
    outcome = run_evaluation(plan, Context(root=Path(job["runs_root"])), progress)
    return outcome.model_copy(update={"job_id": job["job_id"]}).model_dump(mode="json")
