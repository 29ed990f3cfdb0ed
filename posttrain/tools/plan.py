"""plan: validate a spec, resolve its defaults, and estimate what it will cost.

The time comes from `pricing/estimate.py`: this shape's finished runs when there are any, else
the step model calibrated on measured GPU figures (posttrain/models/calibration.py). Each estimate
states its basis and its uncertainty; the upper estimate is checked against the timeout,
and the worst case (the whole timeout) is what the budget caps are checked against.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import BudgetError, ConfigError, NotFoundError, RewardError
from posttrain.launching.columns import check_data
from posttrain.launching.sweeps import (
    ArmPlan,
    ExperimentPlan,
    early_stop_text,
    experiment_arms,
    parallel_text,
    ranked_metric,
    sweep_of,
    wall_time_s,
)
from posttrain.ledger.budget import BudgetPolicy, Ledger
from posttrain.models.calibration import fits
from posttrain.pricing.cost import (
    estimate,
    refusal,
    refuse_unreachable_judge,
    total_cost,
    unlaunchable,
)
from posttrain.pricing.estimate import PROMPT_TOKENS_GUESS, teacher_params
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import RunSpec, load_spec
from posttrain.spec.sweep import Sweep


class PlanResult(BaseModel):
    spec_id: str
    spec: dict[str, Any] = Field(description="The resolved spec, every default filled in.")
    cost: CostEstimate
    fit: dict[str, Any] | None = Field(None, description="Whether the model fits the GPU.")
    defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Every field the spec left out, by dotted name, with the value filled in.",
    )
    warnings: list[str] = Field(default_factory=list)
    experiment: ExperimentPlan | None = Field(
        None,
        description="A spec with `sweep:`: every arm with its price; `cost` is the total of "
        "every arm's runs, and `spec` the base spec the arms vary.",
    )


def filled_defaults(model: BaseModel, prefix: str = "") -> dict[str, Any]:
    """The fields of a validated spec that its author did not write, with their values; a
    section written in part is listed field by field."""
    out: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        dotted = f"{prefix}{name}"
        if name in model.model_fields_set and isinstance(value, BaseModel):
            out.update(filled_defaults(value, f"{dotted}."))
        elif name not in model.model_fields_set:
            out[dotted] = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return out


def _over_cap(worst_case_usd: float) -> str | None:
    """The budget caps, checked as `launch` checks them, in its words (None within them)."""
    if worst_case_usd <= 0:
        return None
    try:
        Ledger().check_caps(BudgetPolicy.load(), worst_case_usd)
    except BudgetError as exc:
        return str(exc)
    return None


def plan(
    spec: RunSpec | dict[str, Any] | str, index: Any = None, roots: list[Path] | None = None
) -> PlanResult:
    """Validate a spec and say what it will cost, whether it fits, and what looks wrong.
    `index`: the run index whose finished runs calibrate the estimate (default: this
    machine's). An experiment (a spec with `sweep:`) is planned arm by arm."""
    if index is None:
        from posttrain.runs.context import Context

        index = Context().index
    if found := sweep_of(spec):
        return plan_experiment(*found, index, roots)
    spec = load_spec(spec, roots)
    cost = estimate(spec, index)
    if refused := refusal(spec, cost):
        modal = spec.model_copy(
            update={"compute": spec.compute.model_copy(update={"backend": "modal"})}
        )
        elsewhere = None if spec.compute.backend == "modal" else estimate(modal, index)
        cost = unlaunchable(cost, refused, elsewhere)
    warnings: list[str] = [f"launch would answer: {refused}"] if refused else []
    try:  # the data's first rows, read cheaply: the columns the spec and its reward use
        check_data(spec)  # and eval.path's columns, eval.metrics' columns
        refuse_unreachable_judge(spec)
    except (ConfigError, NotFoundError, RewardError) as exc:
        warnings.append(f"launch would answer: {exc}")
    if cap := _over_cap(cost.worst_case_usd):
        warnings.append(f"launch would answer: {cap}")
    preset, a, algorithm = spec.model.preset, spec.algorithm, algorithm_of(spec)
    fit = None
    if preset is not None and spec.compute.backend != "local":
        prompt = min(PROMPT_TOKENS_GUESS, a.max_prompt_length)
        fit = fits(
            preset,
            spec.gpu,
            a.lora is not None,
            a.max_completion_length,
            spec.batch_per_gpu,  # what one GPU holds
            prompt_tokens=prompt,
            terms=algorithm.step,
            teacher_params=teacher_params(spec),
            beta=a.beta,  # a full fine-tune's GRPO then holds a reference model
            lora_rank=a.lora.r if a.lora else 0,
        )
        peaks = [m["peak_memory_gb"] for m in index.measured(spec.shape) if m["peak_memory_gb"]]
        if peaks:
            have = fit["have_gb"]
            fit = {
                **fit,
                "measured_gb": max(peaks),
                "fits": None if have is None else max(peaks) <= have,
            }
        if fit["fits"] is None:
            warnings.append(
                f"the memory of a {fit['gpu']} is not in posttrain's table (a GPU type from "
                f"the price override file): check that {preset.name} fits, about "
                f"{fit['need_gb']} GB"
            )
        elif not fit["fits"]:
            warnings.append(
                f"{preset.name} needs about {fit['need_gb']} GB but a {fit['gpu']} has "
                f"{fit['have_gb']} GB: use LoRA, a smaller batch_size, or a larger GPU"
            )
    tiny = preset is not None and preset.hf_repo is None
    if algorithm.rewarded and a.steps < 100 and tiny and spec.dataset.builtin == "rhyme-gym":
        warnings.append(  # measured on the gym only: other tasks' curves are their own
            f"{a.steps} {algorithm.title} steps is a smoke test: on the tiny gym the reward "
            f"sits flat for ~200 steps before it rises"
        )
    if spec.budget_usd is not None and cost.worst_case_usd > spec.budget_usd:
        warnings.append(
            f"the worst case ${cost.worst_case_usd:.2f} (whole timeout) is over budget_usd "
            f"${spec.budget_usd:.2f}: lower compute.timeout_s"
        )
    if cost.stop_step is not None:
        warnings.insert(0, cost.summary)
        finish_s = math.ceil(cost.run_high_s / 60) * 60
        if cap_then := _over_cap(round(finish_s * cost.usd_per_s * cost.gpu_count, 2)):
            warnings.insert(1, f"with compute.timeout_s {finish_s}, launch would say: {cap_then}")
    elif cost.timeout_note:
        warnings.append(f"the run is {cost.timeout_note}")
    if spec.environment is not None:
        warnings.append(
            f"multi-turn episodes: each step samples up to {spec.environment.max_turns + 1} "
            f"assistant turns a rollout and waits on your tools, which the estimate (one turn) "
            f"does not price; a dry run (`smoke_run`) measures it. Run check_environment first"
        )
    elif note := algorithm.note_for(spec):
        warnings.append(note)
    if a.lora is None and preset is not None and preset.n_params > 2e9:
        warnings.append(f"full fine-tuning {preset.name} is costly; LoRA is the default")
    return PlanResult(
        spec_id=spec.spec_id,
        spec=spec.model_dump(mode="json"),
        cost=cost,
        fit=fit,
        defaults=filled_defaults(spec),
        warnings=warnings,
    )


def plan_experiment(
    base: dict[str, Any], sweep: Sweep, index: Any, roots: list[Path] | None = None
) -> PlanResult:
    """Every arm planned as the spec it is, priced for its seeds; the experiment's total is
    what a launch asks the human to approve, and its caps are checked on the total."""
    arm_plans, costs, warnings = [], [], []
    built = experiment_arms(base, sweep, roots)
    for arm, arm_spec in built:
        one = plan(arm_spec, index)
        arm_costs = [one.cost] * len(sweep.seeds)
        costs += arm_costs
        arm_plans.append(
            ArmPlan(
                name=arm.name,
                overrides=arm.overrides,
                spec_id=one.spec_id,
                seeds=sweep.seeds,
                cost=total_cost(arm_costs),
                warnings=one.warnings,
            )
        )
        warnings += [f"arm {arm.name}: {w}" for w in one.warnings if "launch would" in w]
    total = total_cost(costs, "one per arm and seed")
    if cap := _over_cap(total.worst_case_usd):
        warnings.insert(0, f"launch would answer: {cap} (the experiment's total)")
    first = built[0][1]
    backend = first.compute.backend
    run_s = [c.run_s or c.expected_s for c in costs]
    # local runs queue one at a time whatever the cap; elsewhere the cap, else all at once
    slots = 1 if backend == "local" else (sweep.max_parallel or len(costs))
    return PlanResult(
        spec_id=first.spec_id,
        spec=first.model_dump(mode="json"),
        cost=total,
        defaults=filled_defaults(first),
        warnings=warnings,
        experiment=ExperimentPlan(
            arms=arm_plans,
            seeds=sweep.seeds,
            runs=len(costs),
            metric=ranked_metric(sweep, [spec for _, spec in built]),
            parallel=parallel_text(backend, run_s, sweep.max_parallel),
            max_parallel=sweep.max_parallel,
            waves=-(-len(costs) // slots),
            wall_time_s=round(wall_time_s(run_s, slots), 1),
            early_stop=early_stop_text(sweep, first, costs[0]),
        ),
    )
