"""A spec's price, told once: the time and money of the whole run and of its timeout, a paid
judge's calls added, the words a human approves, and the refusals launch gives before any
price (a local run of real weights the CPU would take too long on, a judge Modal cannot reach).

`plan`, the approval question, groups, experiments and launch all read their price here.
"""

from __future__ import annotations

import math
from typing import Any

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.models.catalog import PRICES_AS_OF, gpu_prices, parse_gpu
from posttrain.models.container import container_for_model, worst_case_s
from posttrain.pricing.estimate import step_estimate
from posttrain.rewards.registry import get_reward
from posttrain.runs.inputs import modal_inputs
from posttrain.spec.batch import split_text
from posttrain.spec.run_plan import CostEstimate
from posttrain.spec.schema import RunSpec

# Data parallel: each GPU steps on its share of the batch (posttrain.spec.batch), and waits
# for the slowest and for the gradients' all-reduce. A guess; the GPU bench measures it.
MULTI_GPU_OVERHEAD = 1.1
# The longest a local run of real weights may be estimated to take (its upper estimate):
# this machine runs one trainer at a time, and a GPU does such a run in minutes.
LOCAL_LIMIT_S = 2 * 3600


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
    if spec.reward is None or spec.reward.name != "judge" or not algorithm_of(spec).rewarded:
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


def refusal(spec: RunSpec, cost: CostEstimate) -> str | None:
    """Launch's own words when it refuses this spec where it is aimed (real weights the CPU
    would take too long on, or cannot load), else None."""
    try:
        refuse_local_weights(spec, cost)
    except ConfigError as exc:
        return str(exc)
    return None


def unlaunchable(cost: CostEstimate, refused: str, modal: CostEstimate | None) -> CostEstimate:
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


def total_cost(costs: list[CostEstimate], what: str = "one per seed") -> CostEstimate:
    """The price of several runs: money adds up; time is the longest run on Modal (they run
    side by side) and the sum locally (they queue)."""
    first = costs[0]
    local = first.backend == "local"
    combine = sum if local else max

    def add(field: str) -> float:
        return round(sum(getattr(c, field) for c in costs), 2)

    return first.model_copy(
        update={
            "expected_s": combine(c.expected_s for c in costs),
            "expected_high_s": combine(c.expected_high_s for c in costs),
            "run_s": combine(c.run_s for c in costs),
            "run_high_s": combine(c.run_high_s for c in costs),
            "expected_usd": add("expected_usd"),
            "expected_high_usd": add("expected_high_usd"),
            "run_usd": add("run_usd"),
            "run_high_usd": add("run_high_usd"),
            "worst_case_usd": add("worst_case_usd"),
            "basis": f"{len(costs)} runs, {what}: {first.basis}",
        }
    )
