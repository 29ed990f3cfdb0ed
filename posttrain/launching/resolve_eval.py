"""An evaluation resolved once, at the edge, into an EvalPlan that every later layer reads.

`resolve_evaluation()` checks the options and the judge, decides what the id names (a run, a
group's seeds, an experiment's arms x seeds) and which of its runs are measured, where each
one generates, and the price. The question to the human, the approval, the detached job and
the work itself take the plan's answer (posttrain.tools.evaluate).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.evals.held_out_tasks import held_out_file_digest
from posttrain.launching.groups import group_runs
from posttrain.pricing.eval_cost import eval_cost
from posttrain.reports.run_models import id_kind
from posttrain.rewards.judge.metric import evaluation_judge, metric_params
from posttrain.runs.layout import RUN_META, SPEC, read_json
from posttrain.runs.run_row import RunRow
from posttrain.spec.eval_plan import EvalPlan, EvalRun, Names
from posttrain.spec.schema import load_spec

UNFINISHED_ARM = ("failed", "cancelled")  # an experiment's runs that do not stop the others


def resolve_evaluation(
    run_id: str,
    ctx: Any,
    *,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    judge: Mapping[str, Any] | None = None,
    roots: list[Path] | None = None,
) -> EvalPlan:
    """The plan of an evaluation; ConfigError (or NotFoundError for an unknown id) for
    anything that would fail later. `judge`: evaluate's own, its rubric_file read inside
    `roots`; None: the spec's eval.judge, if any."""
    if not 1 <= k <= 64 or not 2 <= base_passes <= 10 or not 5 <= max_tasks <= 5000:
        raise ConfigError("k must be 1..64, base_passes 2..10 and max_tasks 5..5000")
    given = metric_params(judge, roots) if judge is not None else None  # before the runs
    names, rows = named_runs(ctx, run_id)
    skipped = []
    if names == "experiment":  # a failed arm does not stop the others
        skipped = [f"{r.run_id} ({r.status})" for r in rows if r.status in UNFINISHED_ARM]
        rows = [r for r in rows if r.status not in UNFINISHED_ARM]
        if not rows:
            raise ConfigError(
                f"no run of experiment {run_id} succeeded ({', '.join(skipped)}); resume it "
                f"with launch and evaluate once its runs succeed"
            )
    for row in rows:
        if row.status != "succeeded":
            raise ConfigError(f"run {row.run_id} is {row.status}; evaluate runs that succeeded")
    runs = [_eval_run(row, names) for row in rows]
    metas = [read_json(run.path / RUN_META) for run in runs]
    chosen = evaluation_judge(given, load_spec(runs[0].path / SPEC))
    return EvalPlan(
        run_id=run_id,
        names=names,
        runs=runs,
        skipped=skipped,
        metric=(metas[0].get("metric") or {}) if names == "experiment" else None,
        k=k,
        base_passes=base_passes,
        max_tasks=max_tasks,
        threshold=threshold,
        seed=seed,
        judge=dict(chosen) if chosen is not None else None,
        held_out_files=held_out_digests(runs),
        cost=eval_cost(runs, chosen, k, base_passes, max_tasks),
    )


def held_out_digests(runs: list[EvalRun]) -> list[str]:
    """The sha256 of each eval.path file the runs' specs name, as they are now: a plan made
    before one was edited is stale (the server's plan cache asks)."""
    specs = [load_spec(run.path / SPEC) for run in runs]
    return sorted({d for spec in specs if (d := held_out_file_digest(spec)) is not None})


def named_runs(ctx: Any, some_id: str) -> tuple[Names, list[RunRow]]:
    """What an id names and its runs' index rows: one run, every seed of a group, or every
    arm x seed of an experiment (in its order: arm, then seed)."""
    names = id_kind(some_id)
    ids = [some_id] if names == "run" else group_runs(ctx, some_id)
    return names, [ctx.run(one) for one in ids]


def _eval_run(row: RunRow, names: Names) -> EvalRun:
    """Where a run generates: on this machine (a local run needs its final model here), or
    on its GPU on the backend that trained it."""
    run_dir = row.path
    meta = read_json(run_dir / RUN_META)
    backend = meta.get("backend") or row.backend_name
    if backend == "local" and not (run_dir / "final").is_dir():
        raise ConfigError(f"run {run_dir.name} has no final model; evaluate a finished run")
    return EvalRun(
        run_id=row.run_id,
        run_dir=str(run_dir),
        backend=backend,
        gpu=None if backend == "local" else meta.get("gpu") or "H100",
        arm=(meta.get("arm") or "?") if names == "experiment" else None,
        overrides=meta.get("overrides") or {},
    )
