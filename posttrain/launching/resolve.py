"""A launch resolved once, at the edge, into a RunPlan that every later layer reads.

`resolve()` validates the spec, reads the reward's columns (a user's reward in the isolated
child, never here), checks the data has them, refuses what cannot run here, prices the run,
and decides the base model by following resume chains. Approval, the ledger, the backend,
run.json, the trainer and `evaluate` all take the plan's answer: nothing downstream parses
the spec again or decides "which base model" a second time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.launching.columns import check_data
from posttrain.pricing.cost import estimate, refuse_local_weights, refuse_unreachable_judge
from posttrain.runs.layout import RUN_META, read_json
from posttrain.spec.run_plan import Base, Resume, RunPlan
from posttrain.spec.schema import RunSpec, load_spec


def resolve(
    spec: RunSpec | dict[str, Any] | str,
    ctx: Any,
    idempotency_key: str | None = None,
    check_runnable: bool = True,
) -> RunPlan:
    """The plan of a launch; ConfigError for anything that would fail later."""
    from posttrain.ledger.approval import dry_run_status

    spec = load_spec(spec)
    cost = estimate(spec, ctx.index)
    if check_runnable:
        refuse_local_weights(spec, cost)
    refuse_unreachable_judge(spec)
    columns = check_data(spec)
    base, resume = _base(spec, ctx)
    return RunPlan(
        spec=spec,
        spec_id=spec.spec_id,
        key=idempotency_key or spec.spec_id,
        explicit_key=idempotency_key is not None,
        backend=spec.compute.backend,
        reward_columns=columns,
        cost=cost,
        base=base,
        resume=resume,
        dry_run_status=dry_run_status(ctx, spec) if cost.worst_case_usd > 0 else None,
    )


def _base(spec: RunSpec, ctx: Any) -> tuple[Base, Resume | None]:
    """The base model, following resume chains: resuming R starts from R's warm-start when
    it had one, else from whatever R itself started from (its own base)."""
    if spec.resume_from is None:
        return Base(described=f"the spec's model {spec.model.name}"), None
    source = ctx.root / spec.resume_from
    if not (source / RUN_META).is_file():
        raise ConfigError(f"resume_from: run '{spec.resume_from}' is not in {ctx.root}")
    ctx.refresh(spec.resume_from)
    saved = [c for c in ctx.index.checkpoints(spec.resume_from) if "checkpoint-" in c["path"]]
    if not saved:
        raise ConfigError(
            f"resume_from: run '{spec.resume_from}' saved no checkpoint (save_every 0, or it "
            f"stopped before the first save); start a new run instead"
        )
    last = max(saved, key=lambda c: c["step"])
    if spec.algorithm.steps <= last["step"]:
        raise ConfigError(
            f"algorithm.steps: {spec.algorithm.steps} leaves nothing to train after run "
            f"'{spec.resume_from}''s last checkpoint (step {last['step']}); steps counts from "
            f"step 0, so set it above {last['step']} (e.g. {last['step'] + spec.algorithm.steps})"
        )
    resume = Resume(run_id=spec.resume_from, checkpoint=last["path"], step=last["step"])
    events = [e["stage"] for e in _stages(source)]
    if "warmstart" in events or (source / "warmstart").is_dir():
        base = Base(
            run_id=spec.resume_from,
            folder="warmstart",
            described=f"the warm-start model of {spec.resume_from}",
        )
        return base, resume
    inherited = read_json(source / RUN_META).get("base")
    if inherited:
        return Base(**inherited), resume
    return Base(described=f"the spec's model {spec.model.name} (as {spec.resume_from})"), resume


def _stages(run_dir: Path) -> list[dict[str, Any]]:
    from posttrain.runs.layout import iter_events

    return [e for e in iter_events(run_dir) if e.get("type") == "stage"]
