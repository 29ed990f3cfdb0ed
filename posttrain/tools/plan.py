"""plan: validate a spec, resolve its defaults, and estimate what it will cost.

The estimate is a model, not a measurement: step time = decoding (one read of the weights
per generated token, at 60% of HBM bandwidth) + training (6 FLOPs per parameter per token
for a full fine-tune, 4 with LoRA, 2 more for the KL reference, at 30% of peak bf16), plus a
fixed start-up (container, image, weights). It is good to a factor of two; the worst case
(the timeout) is what the budget caps are checked against.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from posttrain.catalog import GPU_PERF, fits, gpu_prices, parse_gpu
from posttrain.spec import RunSpec, load_spec

STARTUP_S = 180.0  # Modal container start, image pull and weights download, measured coarsely
STEP_OVERHEAD_S = 0.5  # reward, logging, the optimizer step
LOCAL_TINY_STEP_S = {"grpo": 0.4, "sft": 0.1}  # measured on 2 CPU cores (bench/smoke.py)
MFU = 0.30
BANDWIDTH_EFFICIENCY = 0.60
PROMPT_TOKENS_GUESS = 128  # prompts are usually far shorter than max_prompt_length


class CostEstimate(BaseModel):
    backend: str
    gpu: str | None = Field(None, description="GPU type, e.g. H100 (None on the local backend).")
    gpu_count: int = 1
    usd_per_s: float = Field(0.0, description="Price of one GPU, $/s.")
    expected_s: float = Field(description="Estimated wall time, start-up included.")
    expected_usd: float
    timeout_s: int
    worst_case_usd: float = Field(description="Cost if the run uses its whole timeout.")
    prices_as_of: str


class PlanResult(BaseModel):
    spec_id: str
    spec: dict[str, Any] = Field(description="The resolved spec, every default filled in.")
    cost: CostEstimate
    fit: dict[str, Any] | None = Field(None, description="Whether the model fits the GPU.")
    warnings: list[str] = Field(default_factory=list)


def step_seconds(spec: RunSpec, gpu: str) -> float:
    """Estimated seconds per training step on one GPU of the given type."""
    preset = spec.model.preset
    if preset is None:
        return 10.0  # an unknown local model: no shape to reason from
    a = spec.algorithm
    tflops, bandwidth = GPU_PERF[gpu]
    params = preset.n_params
    tokens = a.batch_size * (PROMPT_TOKENS_GUESS + a.max_completion_length)
    per_token = (4 if a.lora else 6) + (2 if a.kind == "grpo" and a.beta > 0 else 0)
    train = per_token * params * tokens / (tflops * 1e12 * MFU)
    generate = 0.0
    if a.kind == "grpo":
        generate = a.max_completion_length * 2 * params / (bandwidth * 1e9 * BANDWIDTH_EFFICIENCY)
    return generate + train + STEP_OVERHEAD_S


def total_steps(spec: RunSpec) -> int:
    warm = spec.algorithm.warmstart.steps if spec.algorithm.warmstart else 0
    return spec.algorithm.steps + warm


def estimate(spec: RunSpec) -> CostEstimate:
    from posttrain.catalog import PRICES_AS_OF

    timeout = spec.compute.timeout_s
    if spec.compute.backend == "local":
        tiny = spec.model.preset is not None and spec.model.preset.name == "tiny-local"
        per_step = LOCAL_TINY_STEP_S[spec.algorithm.kind] if tiny else 30.0
        expected = min(timeout, 15 + total_steps(spec) * per_step)
        return CostEstimate(
            backend="local",
            expected_s=round(expected, 1),
            expected_usd=0.0,
            timeout_s=timeout,
            worst_case_usd=0.0,
            prices_as_of=PRICES_AS_OF,
        )
    gpu, count = parse_gpu(spec.gpu)
    price = gpu_prices()[gpu]
    parallel = count * 0.9 if count > 1 else 1.0  # data parallel, minus communication
    expected = min(timeout, STARTUP_S + total_steps(spec) * step_seconds(spec, gpu) / parallel)
    return CostEstimate(
        backend=spec.compute.backend,
        gpu=gpu,
        gpu_count=count,
        usd_per_s=price,
        expected_s=round(expected, 1),
        expected_usd=round(expected * price * count, 2),
        timeout_s=timeout,
        worst_case_usd=round(timeout * price * count, 2),
        prices_as_of=PRICES_AS_OF,
    )


def plan(spec: RunSpec | dict[str, Any] | str) -> PlanResult:
    """Validate a spec and say what it will cost, whether it fits, and what looks wrong."""
    spec = load_spec(spec)
    cost = estimate(spec)
    warnings: list[str] = []
    preset, a = spec.model.preset, spec.algorithm
    fit = None
    if preset is not None and spec.compute.backend != "local":
        fit = fits(preset, spec.gpu, a.lora is not None, a.max_completion_length, a.batch_size)
        if not fit["fits"]:
            warnings.append(
                f"{preset.name} needs about {fit['need_gb']} GB but a {fit['gpu']} has "
                f"{fit['have_gb']} GB: use LoRA, a smaller batch_size, or a larger GPU"
            )
    m = spec.model
    real = not (preset is not None and preset.hf_repo is None) and not m.stand_in
    if spec.compute.backend == "local" and real and not m.random_weights:
        warnings.append(
            f"{m.name} on the local backend: `launch` will not load its real weights onto this "
            f"CPU. `smoke_run` dry-runs this exact spec (data, template, reward, algorithm) on a "
            f"stand-in of the same family, free; set compute.backend: modal to train {m.name}"
        )
    if a.kind == "grpo" and a.steps < 100:
        warnings.append(
            f"{a.steps} GRPO steps is a smoke test: on the tiny gym the reward sits flat for "
            f"~200 steps before it rises"
        )
    if spec.budget_usd is not None and cost.worst_case_usd > spec.budget_usd:
        warnings.append(
            f"the worst case ${cost.worst_case_usd:.2f} (whole timeout) is over budget_usd "
            f"${spec.budget_usd:.2f}: lower compute.timeout_s"
        )
    if cost.expected_s >= spec.compute.timeout_s:
        warnings.append(
            f"the estimated time reaches the timeout ({spec.compute.timeout_s} s): the run may "
            f"be cut off; raise compute.timeout_s or lower steps"
        )
    if a.lora is None and preset is not None and preset.n_params > 2e9:
        warnings.append(f"full fine-tuning {preset.name} is costly; LoRA is the default")
    return PlanResult(
        spec_id=spec.spec_id,
        spec=spec.model_dump(mode="json"),
        cost=cost,
        fit=fit,
        warnings=warnings,
    )
