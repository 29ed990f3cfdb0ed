"""plan: validate a spec, resolve its defaults, and estimate what it will cost.

The time comes from `tools/estimate.py`: this shape's finished runs when there are any, else
the step model calibrated on measured GPU figures (posttrain/models/calibration.py). Each estimate
states its basis and its uncertainty; the upper estimate is checked against the timeout,
and the worst case (the whole timeout) is what the budget caps are checked against.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import BudgetError, ConfigError, NotFoundError, RewardError
from posttrain.models.calibration import fits
from posttrain.models.catalog import PRICES_AS_OF, gpu_prices, parse_gpu
from posttrain.models.container import container_for_model, worst_case_s
from posttrain.rewards.registry import get_reward
from posttrain.runs.inputs import modal_inputs
from posttrain.spec.batch import split_text
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import RunSpec, load_spec
from posttrain.spec.sweep import Sweep
from posttrain.tools.budget import BudgetPolicy, Ledger
from posttrain.tools.data import check_data
from posttrain.tools.estimate import PROMPT_TOKENS_GUESS, step_estimate, teacher_params
from posttrain.tools.sweeps import (
    ArmPlan,
    ExperimentPlan,
    experiment_arms,
    parallel_text,
    sweep_of,
    total_cost,
)

# Data parallel: each GPU steps on its share of the batch (posttrain.spec.batch), and waits
# for the slowest and for the gradients' all-reduce. A guess; the GPU bench measures it.
MULTI_GPU_OVERHEAD = 1.1
# The longest a local run of real weights may be estimated to take (its upper estimate):
# this machine runs one trainer at a time, and a GPU does such a run in minutes.
LOCAL_LIMIT_S = 2 * 3600


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


def total_steps(spec: RunSpec) -> int:
    warm = spec.algorithm.warmstart.steps if spec.algorithm.warmstart else 0
    return spec.algorithm.steps + warm


def estimate(spec: RunSpec, index: Any = None) -> CostEstimate:
    """Time and money for the spec; `index` (a Store) supplies finished runs of its shape.
    The whole run is priced (`run_*`) beside what its timeout lets it spend (`expected_*`)."""
    measured = index.measured(spec.shape) if index is not None else []
    se = step_estimate(spec, measured)
    a, timeout = spec.algorithm, spec.compute.timeout_s
    local = spec.compute.backend == "local"
    gpu, count = (None, 1) if local else parse_gpu(spec.gpu)
    price = 0.0 if local or gpu is None else gpu_prices()[gpu]
    container = None if gpu is None else container_for_model(gpu, count, spec.model.name)
    # a finished run of this shape (its GPU count included) measured its GPUs' waits already
    step = se.step_s * (MULTI_GPU_OVERHEAD if count > 1 and not se.runs_used else 1.0)
    warm = (a.warmstart.steps if a.warmstart else 0) * se.warm_step_s
    training = a.steps * step + warm
    expected = se.startup_s + training
    high = se.startup_s * 1.5 + training * se.factor
    usd_per_s = container.usd_per_s if container else 0.0  # GPUs, CPU cores and memory
    worst_s = worst_case_s(timeout) if container else timeout
    stop_step = None
    if expected > timeout:
        stop_step = min(a.steps, max(0, int((timeout - se.startup_s - warm) / step)))
    cost = CostEstimate(
        backend=spec.compute.backend,
        gpu=gpu,
        gpu_count=count,
        batch_per_gpu=spec.batch_per_gpu if count > 1 else None,
        usd_per_s=price,
        cpu_cores=container.cores if container else 0.0,
        memory_gib=container.memory_gib if container else 0,
        container_usd_per_s=round(usd_per_s, 8),
        worst_case_s=worst_s,
        step_s=round(step, 3),
        warm_steps=a.warmstart.steps if a.warmstart else 0,
        warm_step_s=round(se.warm_step_s, 3) if a.warmstart else 0.0,
        expected_s=round(min(timeout, expected), 1),
        expected_high_s=round(min(timeout, high), 1),
        expected_usd=round(min(timeout, expected) * usd_per_s, 2),
        expected_high_usd=round(min(timeout, high) * usd_per_s, 2),
        run_s=round(expected, 1),
        run_high_s=round(high, 1),
        run_usd=round(expected * usd_per_s, 2),
        run_high_usd=round(high * usd_per_s, 2),
        stop_step=stop_step,
        timeout_s=timeout,
        worst_case_usd=round(worst_s * usd_per_s, 2),
        basis=se.basis,
        runs_used=se.runs_used,
        timeout_note=_timeout_note(
            a.steps, step, se.factor, timeout - se.startup_s - warm, expected, high, timeout
        ),
        prices_as_of=PRICES_AS_OF,
    )
    cost = with_judge(cost, spec)
    return cost.model_copy(update={"summary": price_text(cost, a.steps)})


def with_judge(cost: CostEstimate, spec: RunSpec) -> CostEstimate:
    """A paid judge's calls added to the price the human approves (a free one adds nothing).
    GRPO calls it every step; a dry run's steps are the cut ones it runs."""
    if spec.reward is None or spec.reward.name != "judge" or spec.algorithm.kind != "grpo":
        return cost  # (a user's reward file is never built here: it is someone's code)
    from posttrain.rewards.judge.price import judge_cost

    reward = get_reward(spec.reward.name, spec.reward.params)

    found = judge_cost(reward, spec.algorithm, spec.algorithm.steps)
    if found.worst_case_usd == 0 and found.expected_usd == 0:
        return cost
    return cost.model_copy(
        update={
            "judge": found.to_dict(),
            "expected_usd": round(cost.expected_usd + found.expected_usd, 2),
            "expected_high_usd": round(cost.expected_high_usd + found.worst_case_usd, 2),
            "run_usd": round(cost.run_usd + found.expected_usd, 2),
            "run_high_usd": round(cost.run_high_usd + found.worst_case_usd, 2),
            "worst_case_usd": round(cost.worst_case_usd + found.worst_case_usd, 2),
        }
    )


def _min(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"


def price_text(cost: CostEstimate, steps: int, runs: int = 1) -> str:
    """The price told straight, in one place for `plan`, the approval question and groups:
    when the timeout would stop the run, that comes first, with what it spends and what
    finishing needs; else the whole run's time and cost, its range and the most it can spend.
    `runs`: a group's size (its money is the sum of its runs)."""
    if cost.refused:
        other = f" On modal: {cost.alternative.summary}" if cost.alternative else ""
        return f"Cannot launch as written: {cost.refused}.{other}"
    where = "this machine" if cost.gpu is None else f"{cost.gpu_count}x {cost.gpu}"
    per_step = f"{cost.step_s:.2f} s a step"
    if cost.batch_per_gpu:  # the spec's batch is that of all GPUs together
        per_step += f" of {split_text(cost.batch_per_gpu * cost.gpu_count, cost.gpu_count)}"
    if cost.warm_steps:
        per_step += f", after {cost.warm_steps} warm-start steps at {cost.warm_step_s:.2f} s"
    all_runs = f" for all {runs} runs" if runs > 1 else ""
    free = cost.usd_per_s == 0 and not cost.judge
    if cost.stop_step is not None:
        spent = "" if free else f", having spent about ${cost.expected_usd:.2f}{all_runs}"
        finish = "" if free else f" and ${cost.run_usd:.2f}"
        finish_high = "" if free else f" and ${cost.run_high_usd:.2f}"
        raise_to = math.ceil(cost.run_high_s / 60) * 60
        in_warm = cost.stop_step == 0 and cost.warm_steps > 0
        at = "during its warm-start" if in_warm else f"at about step {cost.stop_step} of {steps}"
        fix = f"raise compute.timeout_s to {raise_to}"
        fix += "" if in_warm else f" or lower algorithm.steps to {cost.stop_step}"
        return (
            f"Its timeout stops it: compute.timeout_s {cost.timeout_s} ({_min(cost.timeout_s)}) "
            f"ends the run {at}{spent} on {where}. Finishing needs about {_min(cost.run_s)}"
            f"{finish} (up to {_min(cost.run_high_s)}{finish_high}; {per_step}): {fix}."
        )
    if free:
        text = (
            f"estimated {_min(cost.run_s)} on {where} ({per_step}), up to "
            f"{_min(cost.run_high_s)}; free"
        )
    else:
        text = (
            f"estimated {_min(cost.run_s)} and ${cost.run_usd:.2f}{all_runs} on {where} "
            f"({per_step}), up to {_min(cost.run_high_s)} and "
            f"${cost.run_high_usd:.2f}; at most ${cost.worst_case_usd:.2f} (its whole "
            f"{_min(cost.timeout_s)} timeout{_restarts(cost)})"
        )
    if judge := cost.judge:  # its share, beside the GPU's
        text += (
            f"; of which the judge ({judge['model']} at {judge['endpoint']}, {judge['mode']} "
            f"mode): {judge['calls']:,} calls, about ${judge['expected_usd']:.2f}, at most "
            f"${judge['worst_case_usd']:.2f} (every call asked twice; "
            f"{judge['price_source']})"
        )
    return f"{text}; it is {cost.timeout_note}" if cost.timeout_note else text


def _restarts(cost: CostEstimate) -> str:
    """What the worst case counts beyond the timeout, on Modal."""
    if not cost.cpu_cores:
        return ""
    starts = cost.worst_case_s - cost.timeout_s
    return (
        f" and two container starts ({starts:.0f} s: Modal's restarts resume inside the "
        f"timeout), {cost.cpu_cores:g} CPU cores and {cost.memory_gib} GiB of memory included"
    )


def _timeout_note(
    steps: int,
    step_s: float,
    factor: float,
    budget_s: float,
    expected_s: float,
    high_s: float,
    timeout_s: int,
) -> str | None:
    """Where the timeout would stop the run, when the estimate (with its uncertainty) says
    it may."""
    if high_s <= timeout_s:
        return None
    if expected_s > timeout_s:
        reached = max(0, int(budget_s / step_s))
        return (
            f"likely to be stopped at about step {reached} of {steps} by its timeout "
            f"({timeout_s} s): raise compute.timeout_s or lower steps"
        )
    reached = max(0, int(budget_s / (step_s * factor)))
    return (
        f"at risk of being stopped at about step {reached} of {steps} by its timeout "
        f"({timeout_s} s) if steps take the upper estimate (x{factor:.2f}); raise "
        f"compute.timeout_s to be safe"
    )


def refuse_unreachable_judge(spec: RunSpec) -> None:
    """A judge reward of a Modal run must be reachable from Modal's container, its key there
    as a Modal secret (a dry run of the same spec, on this machine, may use a local judge)."""
    if spec.compute.backend == "modal" and spec.reward and spec.reward.name == "judge":
        from posttrain.rewards.judge.reward import modal_problem

        if problem := modal_problem(spec.reward.params):
            raise ConfigError(problem)


def refuse_local_weights(spec: RunSpec, cost: CostEstimate) -> None:
    """A local run of real weights starts only when the plan's own CPU estimate for its shape
    is within LOCAL_LIMIT_S and the weights are on this machine (packaged, a folder, a .gguf
    file, or the Hugging Face cache); tiny-local and stand-ins always run here. A Modal run
    starts only when every local file it names can be uploaded: never a model folder."""
    m, teacher = spec.model, spec.algorithm.teacher
    if spec.compute.backend == "modal":
        modal_inputs(spec)  # every local file it names can go to the Volume: no model folder
    if spec.compute.backend != "local" or m.stand_in or m.random_weights:
        return
    if m.preset is not None and m.preset.hf_repo is None:
        return  # tiny-local, the demo
    if cost.run_high_s > LOCAL_LIMIT_S:
        raise ConfigError(
            f"compute.backend 'local': training {m.name} on this machine's CPU is estimated at "
            f"{_min(cost.run_s)} (up to {_min(cost.run_high_s)}; {cost.step_s:.1f} s a step), "
            f"over the {_min(LOCAL_LIMIT_S)} a local run may take. Locally, dry-run your spec "
            f"on a stand-in of the same family (`smoke_run`, or `posttrain smoke SPEC`: free, "
            f"about a minute); to train {m.name} itself, set compute.backend: modal"
        )
    where = _weights_here(m.name) or (_weights_here(teacher) if teacher else None)
    if where is not None:
        raise ConfigError(
            f"compute.backend 'local': {where}. Locally, dry-run your spec on a stand-in "
            f"(`smoke_run`, or `posttrain smoke SPEC`); to train {m.name} itself, set "
            f"compute.backend: modal"
        )


def _weights_here(name: str) -> str | None:
    """Why the model's weights cannot be loaded on this machine, or None when they can."""
    from posttrain.core.paths import expand
    from posttrain.models.catalog import get_preset, packaged_weights

    preset = get_preset(name)
    if preset is not None and preset.packaged is not None:
        packaged_weights(preset)  # ConfigError with the install command when missing
        return None
    if preset is None and expand(name).exists():
        return None  # a model folder or a .gguf file (the spec checked that it exists)
    repo = preset.hf_repo if preset is not None else name
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(repo or name, "config.json"), str):
            return None
    except Exception:  # an unusual cache layout: the hub may still serve it
        pass
    from posttrain.gpu.tokenizers import hub_reachable

    if hub_reachable():
        return None
    return (
        f"{name}'s weights are not on this machine (not in the Hugging Face cache) and the "
        f"hub cannot be reached to download them"
    )


def _refusal(spec: RunSpec, cost: CostEstimate) -> str | None:
    """Launch's own words when it refuses this spec where it is aimed (real weights the CPU
    would take too long on, or cannot load), else None."""
    try:
        refuse_local_weights(spec, cost)
    except ConfigError as exc:
        return str(exc)
    return None


def _unlaunchable(cost: CostEstimate, refused: str, modal: CostEstimate | None) -> CostEstimate:
    """A spec launch refuses is not priced as a run: it carries launch's refusal and, beside
    it, what the same spec costs on Modal (None: it was aimed at Modal)."""
    zero = ("expected_s", "expected_high_s", "expected_usd", "expected_high_usd", "step_s")
    update: dict[str, Any] = {name: 0.0 for name in zero}
    update |= {n: 0.0 for n in ("run_s", "run_high_s", "run_usd", "run_high_usd")}
    update |= {"refused": refused, "alternative": modal, "timeout_note": None, "stop_step": None}
    refused_cost = cost.model_copy(update=update)
    summary = price_text(refused_cost, 0)
    return refused_cost.model_copy(
        update={"summary": summary, "basis": f"not priced here: {refused}"}
    )


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
        from posttrain.tools.context import Context

        index = Context().index
    if found := sweep_of(spec):
        return plan_experiment(*found, index, roots)
    spec = load_spec(spec, roots)
    cost = estimate(spec, index)
    if refused := _refusal(spec, cost):
        modal = spec.model_copy(
            update={"compute": spec.compute.model_copy(update={"backend": "modal"})}
        )
        elsewhere = None if spec.compute.backend == "modal" else estimate(modal, index)
        cost = _unlaunchable(cost, refused, elsewhere)
    warnings: list[str] = [f"launch would answer: {refused}"] if refused else []
    try:  # the data's first rows, read cheaply: the columns the spec and its reward use
        check_data(spec)
        refuse_unreachable_judge(spec)
    except (ConfigError, NotFoundError, RewardError) as exc:
        warnings.append(f"launch would answer: {exc}")
    if cap := _over_cap(cost.worst_case_usd):
        warnings.append(f"launch would answer: {cap}")
    preset, a = spec.model.preset, spec.algorithm
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
            kind=a.kind,
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
    if a.kind == "grpo" and a.steps < 100 and tiny and spec.dataset.builtin == "rhyme-gym":
        warnings.append(  # measured on the gym only: other tasks' curves are their own
            f"{a.steps} GRPO steps is a smoke test: on the tiny gym the reward sits flat for "
            f"~200 steps before it rises"
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
    elif a.kind == "distill":
        warnings.append(teacher_note(spec))
    elif a.kind == "dpo":
        warnings.append(
            "DPO trains on the pairs, with no reward; evaluate compares the trained and base "
            "models by held-out preference accuracy (the share of held-out pairs whose chosen "
            "answer each finds likelier), beside the chosen answers' likelihood "
            "(reference_nll: a rise is DPO's known failure). Run `posttrain data check` first: "
            "it flags identical, contradicting and cut-off pairs and a length bias"
        )
    elif spec.reward is None:
        warnings.append(
            "no reward: SFT trains without one, and evaluate compares the trained and base "
            "models by the held-out references' likelihood (reference_nll, lower is better); "
            "name a reward (e.g. tool_call) to have evaluate score sampled answers too"
        )
    elif a.kind == "grpo" and "reward" not in spec.model_fields_set:
        warnings.append(
            f"reward: none given, so GRPO maximises the default '{spec.reward.name}'; name "
            f"the reward your task needs"
        )
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


def teacher_note(spec: RunSpec) -> str:
    """What a distillation's teacher costs, and what could not be checked about it."""
    from posttrain.models.catalog import shape_of, vocabulary_of

    a, student = spec.algorithm, shape_of(spec.model.name)
    teacher = shape_of(a.teacher or "")
    if teacher is None or student is None:
        size = (
            f"the teacher {a.teacher}'s size is unknown here, so its forward pass is priced as "
            f"the student's"
        )
    else:
        share = teacher.n_params / (3 * student.n_params + teacher.n_params)
        size = (
            f"the teacher {a.teacher} ({teacher.n_params / 1e9:.1f}B parameters) runs a forward "
            f"pass over every sampled answer: about {share:.0%} of a step's training compute "
            f"(generation aside), and its weights are in memory beside the student's"
        )
    checked = (
        "its tokenizer is the student's family"
        if vocabulary_of(a.teacher or "") is not None
        else "its tokenizer's family is unknown here: the trainer compares the two "
        "vocabularies before the teacher's weights load"
    )
    return (
        f"distillation: no reward; {size}; {checked}. evaluate compares the student's "
        f"held-out answers' likelihood (reference_nll) where the rows have references"
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
            metric=sweep.metric,
            parallel=parallel_text(backend, len(costs)),
        ),
    )
