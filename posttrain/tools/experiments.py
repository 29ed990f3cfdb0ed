"""Experiments: a spec with a `sweep:` block, planned, approved and launched as one.

An experiment is a run group whose runs differ by more than their seed: every arm of the
sweep (posttrain.spec.sweep) once per seed. `resolve_experiment` validates every arm as a
whole spec and resolves each run's plan (data, reward columns, price) before anything is
reserved, so a bad key or value is refused naming its arm, and nothing starts. Then
`launch_group` (posttrain.launching.groups) asks one question for the total, reserves every run
in one ledger transaction (all or none, one idempotency key for the experiment) and submits
them. Each run's run.json names its experiment (the group id), its arm and the arm's
overrides, which list_runs and get_run show.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals.compare import stored_comparison
from posttrain.launching.early_stop import standing
from posttrain.launching.groups import GroupPlan, group_runs, new_group_id
from posttrain.launching.resolve import resolve
from posttrain.launching.sweeps import checked, experiment_arms, ranked_metric
from posttrain.ledger.budget import Ledger
from posttrain.pricing.cost import total_cost
from posttrain.reports.run_models import EXPERIMENT_ID_PREFIX, RunSummary, id_kind
from posttrain.runs.layout import RUN_META, read_json
from posttrain.spec.schema import MAX_NAME
from posttrain.spec.sweep import MAX_RUNS, Sweep
from posttrain.tools.runs import list_runs


def experiment_key(base: dict[str, Any], sweep: Sweep, seeds: list[int]) -> str:
    """One experiment, one key: its base spec, its sweep and its seeds, canonically."""
    # the keys added later (the cap, the early stop; the metric now defaults to the kind's) are
    # left out as they were then: an experiment launched before keeps its key
    data = sweep.model_dump(mode="json", exclude={"max_parallel"})
    if data.get("early_stop") is None:
        data.pop("early_stop", None)
    data["metric"] = data["metric"] or {"name": "reward", "goal": "maximize"}
    text = json.dumps(
        {"base": base, "sweep": data, "seeds": seeds},
        sort_keys=True,
        default=str,
    )
    return "experiment:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_experiment(
    base: dict[str, Any],
    sweep: Sweep,
    ctx: Any,
    key: str | None = None,
    seeds: list[int] | None = None,
    roots: list[Path] | None = None,
) -> GroupPlan:
    """One plan per arm and seed, every one resolved before anything is reserved; with
    `roots`, every path an arm names must lie inside them."""
    seeds = list(dict.fromkeys(int(s) for s in (sweep.seeds if seeds is None else seeds)))
    built = experiment_arms(base, sweep, roots)
    if not seeds or len(built) * len(seeds) > MAX_RUNS:
        raise ConfigError(
            f"seeds: {len(built)} arms x {len(seeds)} seeds; an experiment runs 1 to "
            f"{MAX_RUNS} runs: give fewer arms or seeds"
        )
    plans, names, overrides = [], [], []
    for arm, spec in built:
        data = spec.model_dump(mode="json")
        label = spec.name or spec.model.name
        for seed in seeds:
            one = {**data, "algorithm": {**data["algorithm"], "seed": seed}}
            suffix = f" [{arm.name}] (seed {seed})"
            one["name"] = label[: max(0, MAX_NAME - len(suffix))] + suffix
            plans.append(checked(arm, lambda one=one: resolve(one, ctx)))
            names.append(arm.name)
            overrides.append(arm.overrides)
    return GroupPlan(
        group_id=new_group_id(EXPERIMENT_ID_PREFIX),
        seeds=seeds,
        plans=plans,
        key=key or experiment_key(base, sweep, seeds),
        explicit_key=key is not None,
        cost=total_cost([p.cost for p in plans], "one per arm and seed"),
        arms=names,
        overrides=overrides,
        metric=ranked_metric(sweep, [spec for _, spec in built]).model_dump(),
        max_parallel=sweep.max_parallel,
        early_stop=_early_stop_rule(sweep, plans[0].spec.algorithm.steps),
    )


def _early_stop_rule(sweep: Sweep, steps: int) -> dict[str, Any] | None:
    stop = sweep.early_stop
    return None if stop is None else {"at_step": stop.step(steps), "window": stop.span(steps)}


def smoke_experiment(
    base: dict[str, Any],
    sweep: Sweep,
    smoke: Any,
    ctx: Any,
    roots: list[Path] | None = None,
) -> tuple[GroupPlan, Any]:
    """The dry run of an experiment: one smoke run for each distinct spec the arms make
    (arms that differ only in what a dry run cuts, such as the learning rate or the steps,
    share one; a model, data, template, reward or adapter change gets its own). `smoke(spec)`
    cuts one spec into its smoke spec and what its dry run proves (launch.smoke_plan)."""
    distinct: dict[str, tuple[Any, Any]] = {}
    for arm, spec in experiment_arms(base, sweep, roots):
        distinct.setdefault(spec.dry_run_key, (arm, spec))
    plans, names, overrides, dry = [], [], [], None
    metric = ranked_metric(sweep, [spec for _, spec in distinct.values()])
    for arm, spec in distinct.values():
        cut, dry = checked(arm, lambda spec=spec: smoke(spec))
        plans.append(checked(arm, lambda cut=cut: resolve(cut, ctx)))
        names.append(arm.name)
        overrides.append(arm.overrides)
    return GroupPlan(
        group_id=new_group_id(),
        seeds=[plans[0].spec.algorithm.seed],
        plans=plans,
        key="smoke:" + experiment_key(base, sweep, sweep.seeds),
        explicit_key=False,
        cost=total_cost([p.cost for p in plans], "one per distinct arm"),
        arms=names,
        overrides=overrides,
        metric=metric.model_dump(),
    ), dry


class ArmView(BaseModel):
    name: str
    overrides: dict[str, Any]
    runs: list[RunSummary] = Field(description="The arm's runs, by seed.")


class ExperimentView(BaseModel):
    experiment_id: str
    arms: list[ArmView] = Field(description="In the sweep's order.")
    early_stop: dict[str, Any] | None = Field(
        None,
        description="sweep.early_stop's decision once made: the arms compared, the ones "
        "stopped, the runs cancelled and the money saved (launching.early_stop); before, "
        "`decided_at` null and a reason: not yet, or never (every run ended unpolled).",
    )
    comparison: dict[str, Any] | None = Field(
        None, description="The latest evaluate of the experiment (evals.compare), or None."
    )


def experiment_view(experiment_id: str, ctx: Any) -> ExperimentView:
    """An experiment's arms, their runs and its latest comparison: what the dashboard shows."""
    if id_kind(experiment_id) != "experiment":
        raise ConfigError(f"'{experiment_id}' is not an experiment id (exp-...)")
    order = group_runs(ctx, experiment_id)  # arm, then seed; raises for an unknown id
    summaries = {r.run_id: r for r in list_runs(limit=1000, ctx=ctx, group_id=experiment_id)}
    arms: dict[str, ArmView] = {}
    comparison = None
    for run_id in order:
        run_dir = ctx.root / run_id
        meta = read_json(run_dir / RUN_META)
        name = meta.get("arm") or "?"
        arm = arms.setdefault(
            name, ArmView(name=name, overrides=meta.get("overrides") or {}, runs=[])
        )
        if run_id in summaries:
            arm.runs.append(summaries[run_id])
        found = stored_comparison(run_dir)
        if found and found.get("experiment_id") == experiment_id and comparison is None:
            comparison = found
    return ExperimentView(
        experiment_id=experiment_id,
        arms=list(arms.values()),
        comparison=comparison,
        early_stop=standing(ctx, order),
    )


def resume(group: GroupPlan, ctx: Any) -> GroupPlan:
    """An experiment launched before with this key is resumed, not started twice: its runs
    that succeeded or are still live are kept, and only the arm x seed runs that failed or
    were cancelled start again, into the same experiment (no plans left: nothing to start).
    A new experiment comes back as it came."""
    first = Ledger().existing(group.key)
    if not first or not (ctx.root / first).is_dir():
        return group
    experiment_id = read_json(ctx.root / first / RUN_META).get("group_id")
    if not experiment_id:
        return group
    runs = group_runs(ctx, experiment_id)
    held, lost = set(), []
    for run_id in runs:
        meta = read_json(ctx.root / run_id / RUN_META)
        row = ctx.index.get(run_id)
        backend = ctx.backends.get(row.backend_name if row else "local")
        live = backend is not None and backend.leftover(ctx.root / run_id)
        if row is None or live or row.status not in ("failed", "cancelled"):
            held.add((meta.get("arm"), meta.get("seed")))
        else:
            lost.append(run_id)
    redo = [
        i
        for i, plan in enumerate(group.plans)
        if (group.arms[i], plan.spec.algorithm.seed) not in held
    ]
    digest = hashlib.sha256(",".join(sorted(lost)).encode()).hexdigest()[:12]
    return group.model_copy(
        update={
            "group_id": experiment_id,
            "plans": [group.plans[i] for i in redo],
            "arms": [group.arms[i] for i in redo],
            "overrides": [group.overrides[i] for i in redo],
            "key": f"{group.key}:again:{digest}",  # one retry of these losses, however raced
            "cost": total_cost([group.plans[i].cost for i in redo]) if redo else group.cost,
            "resume_of": experiment_id,
            "kept": [r for r in runs if r not in lost],
            "arm_order": list(dict.fromkeys(group.arms)),
        }
    )
