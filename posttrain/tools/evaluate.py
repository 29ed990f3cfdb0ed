"""evaluate as a verb: local generation on this machine; Modal generation costs money, so it
is approved like a launch (policy, token or human) and its worst case counts against the
caps. The result is stored with the run and shown by get_run.

An evaluation takes minutes, longer than a client waits on one tool call: `start_evaluate`
approves it and runs it as a detached job (posttrain.jobs.detached), returning its id at once;
`evaluate` runs the same work in this process."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals.compare import ExperimentResult, compare, store_comparison
from posttrain.evals.evaluation import EvalResult, evaluate_runs, store
from posttrain.jobs.detached import JobView, find_job, start_job
from posttrain.ledger.approval import Decision, decide, unapproved, who_approves
from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.models.container import container_for_model, worst_case_s
from posttrain.reports.run_models import EXPERIMENT_ID_PREFIX, GROUP_ID_PREFIX
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, SPEC, read_json

EVAL_TIMEOUT_S = 3600  # the worst case an evaluation on Modal is approved for


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


def _check(k: int, base_passes: int, max_tasks: int) -> None:
    if not 1 <= k <= 64 or not 2 <= base_passes <= 10 or not 5 <= max_tasks <= 5000:
        raise ConfigError("k must be 1..64, base_passes 2..10 and max_tasks 5..5000")


def _cost(run_dirs: list[Path]) -> tuple[str | None, float]:
    """The GPU an evaluation of these runs would use, and its worst-case cost (each run's
    passes are one call)."""
    meta = read_json(run_dirs[0] / RUN_META)
    if (meta.get("backend") or "local") == "local":
        return None, 0.0
    gpu = meta.get("gpu") or "H100"
    model = (read_json(run_dirs[0] / SPEC).get("model") or {}).get("name") or ""
    container = container_for_model(gpu, 1, model)  # its GPU, CPU cores and memory
    return gpu, round(worst_case_s(EVAL_TIMEOUT_S) * container.usd_per_s * len(run_dirs), 2)


def _judge_share(
    run_dirs: list[Path], judge: dict[str, Any] | None, k: int, base_passes: int, max_tasks: int
) -> Any:
    """A paid judge's share of this evaluation (evaluate's judge, else the spec's
    eval.judge), at most: every sample of every pass asked alone; None for no judge or a free
    one."""
    from posttrain.rewards.judge.metric import metric_judge
    from posttrain.rewards.judge.price import evaluation_cost
    from posttrain.runs.layout import HOLDOUT, SPEC
    from posttrain.spec.schema import load_spec

    spec = load_spec(run_dirs[0] / SPEC)
    params = judge if judge is not None else (spec.eval.judge if spec.eval else None)
    if not params or spec.environment is not None:  # episodes are not judged (not built)
        return None
    reward = metric_judge(params)
    if reward.free:
        return None
    try:
        held_out = sum(1 for line in (run_dirs[0] / HOLDOUT).open(encoding="utf-8") if line)
    except OSError:
        held_out = max_tasks
    answers = min(max_tasks, held_out) * k * (base_passes + 1) * len(run_dirs)
    a = spec.algorithm
    return evaluation_cost(reward, answers, a.max_prompt_length, a.max_completion_length)


def _judge_words(share: Any) -> str:
    return (
        f"ask the judge {share.model} at {share.endpoint} up to {share.calls:,} times "
        f"(~{share.tokens_in / 1e6:.1f}M tokens in; up to ${share.worst_case_usd:.2f}, "
        f"{share.price_source})"
    )


def _runs(ctx: Context, run_or_group: str) -> list[dict[str, Any]]:
    """The runs an id names: one run, every seed of a group, or every arm x seed of an
    experiment."""
    from posttrain.launching.groups import group_runs

    ids = (
        group_runs(ctx, run_or_group)
        if run_or_group.startswith((GROUP_ID_PREFIX, EXPERIMENT_ID_PREFIX))
        else [run_or_group]
    )
    return [ctx.run(run_id) for run_id in ids]


def eval_question(
    run_id: str,
    confirmation_token: str | None = None,
    ctx: Context | None = None,
    judge: dict[str, Any] | None = None,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
) -> str | None:
    """What to ask the human before an evaluation that costs money (on Modal, or with a
    paid judge); None when nobody needs asking."""
    ctx = ctx or Context()
    rows = _runs(ctx, run_id)
    run_dirs = [Path(r["run_dir"]) for r in rows]
    gpu, worst = _cost(run_dirs)
    share = _judge_share(run_dirs, judge, k, base_passes, max_tasks)
    worst = round(worst + (share.worst_case_usd if share else 0.0), 2)
    if worst == 0 or who_approves(worst, confirmation_token, BudgetPolicy.load()):
        return None
    kind = "experiment" if run_id.startswith(EXPERIMENT_ID_PREFIX) else "group"
    what = f"the {len(rows)} runs of {kind} {run_id}" if len(rows) > 1 else run_id
    where = (
        f"on Modal ({gpu}, base and trained passes on the held-out tasks) for up to "
        f"{EVAL_TIMEOUT_S // 60} min each"
        if gpu
        else "on this machine"
    )
    judged = f", and {_judge_words(share)}" if share else ""
    return f"Evaluate {what} {where}{judged}: at most ${worst:.2f}?"


def _args(
    run_id: str,
    k: int,
    base_passes: int,
    max_tasks: int,
    threshold: float | None,
    seed: int,
    judge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "k": k,
        "base_passes": base_passes,
        "max_tasks": max_tasks,
        "threshold": threshold,
        "seed": seed,
        "judge": judge,  # another judge is another evaluation (another job)
    }


def checked_judge(
    judge: dict[str, Any] | None, roots: list[Path] | None = None
) -> dict[str, Any] | None:
    """The judge of the un-optimised metric as evaluate will use it (its rubric_file read
    inside the roots), checked before anything starts."""
    if judge is None:
        return None
    from posttrain.rewards.judge.metric import metric_params

    return metric_params(judge, roots)


def _authorize(
    run_id: str,
    k: int,
    base_passes: int,
    max_tasks: int,
    seed: int,
    human: Decision,
    confirmation_token: str | None,
    ctx: Context,
    judge: dict[str, Any] | None = None,
) -> tuple[str, float] | EvaluateOutcome:
    """Check the runs can be evaluated and approve the spend (the GPU on Modal, a paid
    judge's calls): (who approved, worst case), or the outcome that stops here (declined, or
    a token for the human)."""
    rows = _runs(ctx, run_id)
    if run_id.startswith(EXPERIMENT_ID_PREFIX):  # a failed arm does not stop the others
        rows = [r for r in rows if r["status"] not in ("failed", "cancelled")]
    for row in rows:
        if row["status"] != "succeeded":
            raise ConfigError(
                f"run {row['run_id']} is {row['status']}; evaluate runs that succeeded"
            )
    _check(k, base_passes, max_tasks)
    run_dirs = [Path(r["run_dir"]) for r in rows]
    gpu, worst = _cost(run_dirs)
    if gpu is None:
        for d in run_dirs:
            if not (d / "final").is_dir():
                raise ConfigError(f"run {d.name} has no final model; evaluate a finished run")
    share = _judge_share(run_dirs, judge, k, base_passes, max_tasks)
    worst = round(worst + (share.worst_case_usd if share else 0.0), 2)
    if worst == 0:
        return "free", worst
    ledger, policy = Ledger(), BudgetPolicy.load()
    spend_id = f"eval:{run_id}:{k}:{base_passes}:{max_tasks}:{seed}"
    if share:  # another judge is another spend
        said = json.dumps(judge, sort_keys=True, default=str)
        spend_id += f":judge:{hashlib.sha256(said.encode()).hexdigest()[:12]}"
    outcome, approved_by, token = decide(spend_id, worst, confirmation_token, human, policy, ledger)
    asked = eval_question(run_id, None, ctx, judge, k, base_passes, max_tasks) if token else ""
    again = "evaluate again with this confirmation_token"
    if stop := unapproved(outcome, token, asked, again, "was evaluated"):
        return EvaluateOutcome(run_id=run_id, worst_case_usd=worst, **stop)
    ledger.reserve_spend(
        policy=policy,
        spend_id=spend_id,
        worst_case_usd=worst,
        approved_by=approved_by or "human",
        token=confirmation_token if approved_by == "token" else None,
    )
    return approved_by or "human", worst


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
    progress: Any = None,
    judge: dict[str, Any] | None = None,
) -> EvaluateOutcome:
    """Base vs trained on the held-out tasks of a run, or of every seed of a group, in this
    process; the verdict is stored with each run. `start_evaluate` runs the same detached.
    `judge`: the params of a judge that scores both arms besides the training reward."""
    ctx = ctx or Context()
    judge = checked_judge(judge)
    approved = _authorize(
        run_id, k, base_passes, max_tasks, seed, human, confirmation_token, ctx, judge
    )
    if isinstance(approved, EvaluateOutcome):
        return approved
    return run_evaluation(
        run_id,
        k,
        base_passes,
        max_tasks,
        threshold,
        seed,
        *approved,
        ctx=ctx,
        progress=progress,
        judge=judge,
    )


def start_evaluate(
    run_id: str,
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
    judge = checked_judge(judge, roots)
    args = _args(run_id, k, base_passes, max_tasks, threshold, seed, judge)
    job = find_job("evaluate", args)
    if job is None:
        approved = _authorize(
            run_id, k, base_passes, max_tasks, seed, human, confirmation_token, ctx, judge
        )
        if isinstance(approved, EvaluateOutcome):
            return approved
        extra = {"approved_by": approved[0], "worst_case_usd": approved[1]}
        job = start_job("evaluate", args, ctx.root, extra)
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


def run_evaluation(
    run_id: str,
    k: int,
    base_passes: int,
    max_tasks: int,
    threshold: float | None,
    seed: int,
    approved_by: str,
    worst_case_usd: float,
    ctx: Context,
    progress: Any = None,
    judge: dict[str, Any] | None = None,
) -> EvaluateOutcome:
    """The evaluation itself, its spend already approved."""
    rows = _runs(ctx, run_id)
    options = {
        "k": k,
        "base_passes": base_passes,
        "max_tasks": max_tasks,
        "seed": seed,
        "judge": judge,
    }
    spent = {"approved_by": approved_by, "worst_case_usd": worst_case_usd}
    if run_id.startswith(EXPERIMENT_ID_PREFIX):
        return _run_experiment(run_id, rows, options, threshold, spent, ctx, progress)
    group_id = run_id if len(rows) > 1 or run_id != rows[0]["run_id"] else None
    result = _evaluated(ctx, rows, group_id, options, threshold, progress)
    return EvaluateOutcome(
        status="done",
        run_id=run_id,
        result=result,
        worst_case_usd=worst_case_usd,
        approved_by=approved_by,
        message=f"{run_id}: {result.verdict}",
    )


def _evaluated(
    ctx: Context,
    rows: list[dict[str, Any]],
    group_id: str | None,
    options: dict[str, Any],
    threshold: float | None,
    progress: Any = None,
) -> EvalResult:
    """These runs evaluated together (a run, a group's seeds, an experiment's arm), on this
    machine or on their GPU, and the result stored with each."""
    run_dirs = [Path(r["run_dir"]) for r in rows]
    gpu, _ = _cost(run_dirs)
    if gpu is None:
        generators = [_local_generate(d) for d in run_dirs]
    else:
        generators = [
            ctx.backend(r["backend"]).generator(d, gpu, EVAL_TIMEOUT_S)  # type: ignore[attr-defined]
            for r, d in zip(rows, run_dirs, strict=True)
        ]
    result = evaluate_runs(
        run_dirs,
        generators,
        group_id=group_id,
        threshold=threshold,
        progress=progress,
        judge_approved=True,  # the caller approved its price (_authorize)
        **options,
    )
    for d in run_dirs:
        store(d, result)
    return result


def _run_experiment(
    experiment_id: str,
    rows: list[dict[str, Any]],
    options: dict[str, Any],
    threshold: float | None,
    spent: dict[str, Any],
    ctx: Context,
    progress: Any = None,
) -> EvaluateOutcome:
    """Each arm evaluated as a group of its seeds on the same held-out tasks, then the arms
    compared (posttrain.evals.compare). Each run keeps its arm's evaluation."""
    skipped = [f"{r['run_id']} ({r['status']})" for r in rows if r["status"] != "succeeded"]
    rows = [r for r in rows if r["status"] == "succeeded"]
    metas = {r["run_id"]: read_json(Path(r["run_dir"]) / RUN_META) for r in rows}
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for row in rows:  # in the experiment's order: arm, then seed
        by_arm.setdefault(metas[row["run_id"]].get("arm") or "?", []).append(row)
    metric = metas[rows[0]["run_id"]].get("metric") or {}
    report = progress or (lambda done, total, message: None)
    evaluated = []
    for i, (arm, arm_rows) in enumerate(by_arm.items()):
        report(i, len(by_arm) + 1, f"evaluating arm {arm} ({len(arm_rows)} run(s))")
        result = _evaluated(ctx, arm_rows, f"{experiment_id} [{arm}]", options, threshold)
        overrides = metas[arm_rows[0]["run_id"]].get("overrides") or {}
        evaluated.append((arm, overrides, result))
    report(len(by_arm), len(by_arm) + 1, "comparing the arms")
    compared = compare(
        experiment_id,
        evaluated,
        metric=metric.get("name", "reward"),
        goal=metric.get("goal", "maximize"),
        seed=options["seed"],
    )
    if skipped:
        compared.warnings.insert(0, f"not evaluated, they did not succeed: {', '.join(skipped)}")
    store_comparison([Path(r["run_dir"]) for r in rows], compared)
    return EvaluateOutcome(
        status="done",
        run_id=experiment_id,
        experiment=compared,
        message=f"{experiment_id}: {compared.verdict}",
        **spent,
    )


def _local_generate(run_dir: Path) -> Any:
    def generate(job: dict[str, Any]) -> dict[str, Any]:
        from posttrain.gpu.arms import generate_job

        return generate_job(run_dir.parent, run_dir.name, job)

    return generate


def dumps(outcome: EvaluateOutcome) -> str:
    return json.dumps(outcome.model_dump(mode="json"), indent=2)


def job_work(job: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    """The detached job's work (posttrain.jobs.worker), from its job.json."""
    from posttrain.tools.evaluate import run_evaluation

    args, extra = job["args"], job.get("extra") or {}
    ctx = Context(root=Path(job["runs_root"]))
    outcome = run_evaluation(
        args["run_id"],
        args["k"],
        args["base_passes"],
        args["max_tasks"],
        args["threshold"],
        args["seed"],
        approved_by=extra.get("approved_by") or "free",
        worst_case_usd=extra.get("worst_case_usd") or 0.0,
        ctx=ctx,
        progress=progress,
        judge=args.get("judge"),
    )
    return outcome.model_copy(update={"job_id": job["job_id"]}).model_dump(mode="json")
