"""What the step-time model is fitted to: measured figures, each dated, with its machine, its
software and the command that measured it.

The cost a human approves comes from `pricing/estimate.py`, whose constants are fitted here
(`fitted()`), never typed in by hand. Add a measurement to MEASUREMENTS and the fit follows.

The model, and why it has this shape (DESIGN.md, "Measured on an H200"):
- Decoding under HF `generate` is bound by per-layer launch overhead, not by HBM bandwidth:
  batch 64 on the Qwen3-0.6B shape took 41 ms a decoding step on an H200, where reading the
  weights takes 0.3 ms. So a decoding step costs `layers x overhead + weights / bandwidth`,
  the overhead fitted to that measurement and assumed the same on every GPU type.
- Inside TRL's GRPOTrainer the same generation takes longer than raw `generate` (LoRA kept
  unmerged, gradient checkpointing on): the factor is fitted from the GRPO step time.
- Training runs at the model FLOPs utilisation measured for SFT (6N FLOPs per token).
- Peak memory is counted tensor by tensor (catalog.memory_estimate_gb), times an allocator
  factor fitted to the measured SFT peak (`fits()`: whether a preset fits a GPU).

On this machine's CPU (`cpu_fitted()`, `cpu_step_s()`), real weights train at rates fitted to
runs of SmolLM2-135M-Instruct: training at one rate of FLOPs (TRAIN_FLOPS x parameters per
token, the KL's forward pass added), generation at another, slower one (2 x parameters per
generated token in batches of a few sequences: per-layer overhead, not arithmetic, bounds it).
Both scale with the parameter count, so a 4B is priced as ~30x the 135M a token.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import Literal

from posttrain.models.catalog import (
    GPU_MEMORY_GB,
    LORA_RANK,
    Preset,
    StepTerms,
    get_preset,
    gpu_perf,
    memory_estimate_gb,
    parse_gpu,
    priced_as,
)

# The two steps measured, as the memory count and the CPU rates see them: a teacher-forced
# SFT step and a sampled GRPO step (with its KL term to the reference).
MEASURED_TERMS = {
    "sft": StepTerms("sft"),
    "grpo": StepTerms("grpo", reference="kl", samples=True),
}

SOFTWARE = (
    "plain TRL 1.16, torch 2.11, transformers 5.17, bf16, LoRA r16 all-linear, random weights"
)
GPU_CHECK = "python bench/gpu_check.py (issue 5 session, 2026-11)"
BANDWIDTH_EFFICIENCY = 0.60  # share of HBM bandwidth a weight read reaches
STEP_OVERHEAD_S = 0.5  # reward, logging, the optimizer step
KL_FLOPS = 2  # per parameter per token: the reference model's forward pass (beta > 0)
TRAIN_FLOPS = 6  # per parameter per token: forward and backward (the MFU convention)


@dataclass(frozen=True)
class Measurement:
    """One measured shape. `step_s` is the steady step time as a (low, high) range."""

    what: Literal["grpo", "sft", "generate"]
    model: str  # a preset: its shape is what was measured (random weights)
    gpu: str
    batch: int  # completions per step (GRPO, generate) or rows (SFT)
    prompt_tokens: int
    completion_tokens: int  # tokens generated (GRPO, generate) or trained after the prompt (SFT)
    step_s: tuple[float, float]
    peak_memory_gb: float | None
    gradient_checkpointing: bool
    date: str
    machine: str
    software: str
    command: str
    note: str = ""

    @property
    def mean_step_s(self) -> float:
        return statistics.fmean(self.step_s)


def _on_h200(**fields: object) -> Measurement:
    """A measurement of the issue-5 session's H200 run of bench/gpu_check.py."""
    common = {
        "gpu": "H200",
        "date": "2026-11",
        "machine": "1x NVIDIA H200 (141 GB)",
        "software": SOFTWARE,
        "command": GPU_CHECK,
    }
    return Measurement(**{**common, **fields})  # type: ignore[arg-type]


_GRPO_06B = {"model": "Qwen3-0.6B", "batch": 64, "prompt_tokens": 30, "completion_tokens": 256}
MEASUREMENTS: tuple[Measurement, ...] = (
    _on_h200(
        what="grpo",
        **_GRPO_06B,
        step_s=(23.0, 26.0),
        peak_memory_gb=None,
        gradient_checkpointing=True,
        note="~650 completion tokens/s; every completion full length (random weights)",
    ),
    _on_h200(
        what="generate",
        **_GRPO_06B,
        step_s=(10.5, 10.5),
        peak_memory_gb=None,
        gradient_checkpointing=False,
        note="raw batched model.generate of the GRPO batch: 1,560 tokens/s",
    ),
    _on_h200(
        what="grpo",
        **_GRPO_06B,
        step_s=(16.0, 16.0),
        peak_memory_gb=41.0,
        gradient_checkpointing=False,
        note="gradient checkpointing off (not what posttrain runs today; not fitted)",
    ),
    _on_h200(
        what="sft",
        model="Qwen3-1.7B",
        batch=8,
        prompt_tokens=48,
        completion_tokens=2000,
        step_s=(8 * 2048 / 19800, 8 * 2048 / 19800),
        peak_memory_gb=8.4,
        gradient_checkpointing=True,
        note="19,800 tokens/s",
    ),
)


@dataclass(frozen=True)
class Fit:
    """The step model's constants, fitted to MEASUREMENTS."""

    decode_overhead_s_per_layer: float  # per decoding step, per layer, under HF generate
    trl_generation_factor: float  # GRPOTrainer's generation time / raw generate's
    training_mfu: float  # model FLOPs utilisation of a training step
    allocator_factor: float  # measured peak memory / the tensors catalog counts
    anchors: tuple[Measurement, ...]  # what was fitted


def decode_step_s(model: str, gpu: str, overhead_s_per_layer: float) -> float:
    """Seconds per decoding step of raw HF generate: launch overhead plus the weight read."""
    preset = get_preset(model)
    assert preset is not None
    _, bandwidth_gb_s = gpu_perf(gpu)
    weights = 2 * preset.n_params / (bandwidth_gb_s * 1e9 * BANDWIDTH_EFFICIENCY)
    return preset.num_hidden_layers * overhead_s_per_layer + weights


def training_s(
    model: str, gpu: str, tokens: int, kl: bool, mfu: float, teacher_params: int = 0
) -> float:
    """Seconds of the forward and backward passes over `tokens` (and the KL reference, and a
    distillation teacher's forward pass: KL_FLOPS a teacher parameter a token, as the
    reference's)."""
    preset = get_preset(model)
    assert preset is not None
    tflops, _ = gpu_perf(gpu)
    flops = (TRAIN_FLOPS + (KL_FLOPS if kl else 0)) * preset.n_params * tokens
    flops += KL_FLOPS * teacher_params * tokens
    return flops / (tflops * 1e12 * mfu)


def _one(what: str, checkpointing: bool = True) -> Measurement:
    return next(
        m
        for m in MEASUREMENTS
        if m.what == what and (m.gradient_checkpointing or what == "generate") == checkpointing
    )


@functools.cache
def fitted() -> Fit:
    """Fit the four constants, one measurement each, in dependency order."""
    sft, generate, grpo = _one("sft"), _one("generate"), _one("grpo")
    tflops, _ = gpu_perf(sft.gpu)
    sft_preset = get_preset(sft.model)
    assert sft_preset is not None
    sft_tokens = sft.batch * (sft.prompt_tokens + sft.completion_tokens)
    mfu = TRAIN_FLOPS * sft_preset.n_params * sft_tokens / (sft.mean_step_s * tflops * 1e12)

    gen_preset = get_preset(generate.model)
    assert gen_preset is not None
    per_decode_step = generate.mean_step_s / generate.completion_tokens
    weights = decode_step_s(generate.model, generate.gpu, 0.0)
    overhead = (per_decode_step - weights) / gen_preset.num_hidden_layers

    grpo_tokens = grpo.batch * (grpo.prompt_tokens + grpo.completion_tokens)
    train = training_s(grpo.model, grpo.gpu, grpo_tokens, True, mfu)
    raw = grpo.completion_tokens * decode_step_s(grpo.model, grpo.gpu, overhead)
    factor = (grpo.mean_step_s - train - STEP_OVERHEAD_S) / raw

    assert sft.peak_memory_gb is not None
    counted = memory_estimate_gb(
        sft_preset,
        True,
        sft.prompt_tokens,
        sft.completion_tokens,
        sft.batch,
        MEASURED_TERMS["sft"],
        1.0,
    )
    return Fit(overhead, factor, mfu, sft.peak_memory_gb / counted, (sft, generate, grpo))


# --- This machine's CPU: real weights on the local backend ---------------------------------

CPU_MACHINE = "2 quiet CPU cores, torch 2.13 CPU, fp32, the trainer's 2 threads, no recomputation"


@dataclass(frozen=True)
class CpuMeasurement:
    """A steady step of a real model trained on this machine's CPU (LoRA r16; where: `command`)."""

    what: Literal["grpo", "sft"]
    model: str  # a preset whose real weights trained
    batch: int  # completions (GRPO) or rows (SFT) per step
    prompt_tokens: int  # the rendered prompt, template included
    completion_tokens: int  # generated (GRPO, mean length) or trained answer tokens (SFT)
    kl: bool  # GRPO with beta > 0: the reference model's forward pass
    step_s: float
    date: str
    command: str
    machine: str = CPU_MACHINE


# The real demo's spec (data/demo_specs.py), `make demo-real` on a fresh clone on two quiet
# cores of an AMD EPYC (the trainer at its default 2 threads, activations kept: no gradient
# checkpointing on the CPU): medians of steady steps from its events.jsonl. The first
# measurement (run-261202-073417-21f8: a longer system prompt, 1 thread at nice 10 beside the
# test suite, checkpointing on) gave 16.6 and 26.4 s; with it, plan put this run at 12.4 min,
# 2.9x the ~4.3 min its training took.
_CPU_RUN = "run-261202-190213-764c: the real demo spec, LoRA r16 on the top 8 of 30 layers"
CPU_MEASUREMENTS: tuple[CpuMeasurement, ...] = (
    CpuMeasurement(
        what="sft",
        model="SmolLM2-135M-Instruct",
        batch=8,
        prompt_tokens=70,
        completion_tokens=31,
        kl=False,
        step_s=4.1,
        date="2026-12-02",
        command=f"{_CPU_RUN} (its warm-start, steps 2-8)",
    ),
    CpuMeasurement(
        what="grpo",
        model="SmolLM2-135M-Instruct",
        batch=8,
        prompt_tokens=70,
        completion_tokens=30,  # the mean completion (29.6 tokens; at most 32)
        kl=False,
        step_s=8.55,
        date="2026-12-02",
        command=f"{_CPU_RUN} (GRPO steps 2-24)",
    ),
)


@dataclass(frozen=True)
class CpuFit:
    train_flops_per_s: float  # TRAIN_FLOPS (+ KL_FLOPS) x parameters x tokens, per second
    generate_flops_per_s: float  # 2 x parameters x generated tokens, per second
    anchors: tuple[CpuMeasurement, ...]


def _train_flops(n_params: int, tokens: int, kl: bool) -> float:
    return (TRAIN_FLOPS + (KL_FLOPS if kl else 0)) * n_params * tokens


@functools.cache
def cpu_fitted() -> CpuFit:
    """The CPU's two rates: training from the SFT measurement, generation from what the GRPO
    measurement leaves after its training pass."""
    sft = next(m for m in CPU_MEASUREMENTS if m.what == "sft")
    grpo = next(m for m in CPU_MEASUREMENTS if m.what == "grpo")
    n_sft, n_grpo = (get_preset(m.model).n_params for m in (sft, grpo))  # type: ignore[union-attr]
    sft_tokens = sft.batch * (sft.prompt_tokens + sft.completion_tokens)
    train_rate = _train_flops(n_sft, sft_tokens, False) / sft.step_s
    grpo_tokens = grpo.batch * (grpo.prompt_tokens + grpo.completion_tokens)
    training = _train_flops(n_grpo, grpo_tokens, grpo.kl) / train_rate
    generating = max(grpo.step_s - training - STEP_OVERHEAD_S, 0.1 * grpo.step_s)
    generate_rate = 2 * n_grpo * grpo.batch * grpo.completion_tokens / generating
    return CpuFit(train_rate, generate_rate, (sft, grpo))


def cpu_step_s(
    n_params: int,
    terms: StepTerms,
    batch: int,
    prompt_tokens: int,
    completion_tokens: int,
    kl: bool,
    teacher_params: int = 0,
) -> float:
    """Seconds per step of a real model of n_params on this machine's CPU."""
    fit = cpu_fitted()
    _, more = priced_as(terms)
    tokens = batch * (prompt_tokens + completion_tokens)
    train = more * _train_flops(n_params, tokens, kl) + KL_FLOPS * teacher_params * tokens
    seconds = train / fit.train_flops_per_s
    if terms.samples:
        generated = 2 * n_params * batch * completion_tokens
        seconds += generated / fit.generate_flops_per_s + STEP_OVERHEAD_S
    return seconds


def fits(
    preset: Preset,
    gpu: str,
    lora: bool,
    completion_tokens: int,
    batch: int,
    prompt_tokens: int = 128,
    terms: StepTerms | None = None,
    teacher_params: int = 0,
    beta: float = 0.0,
    lora_rank: int = LORA_RANK,
) -> dict:
    """Whether a preset fits a GPU spec ('H100:2' shares nothing: each GPU holds a replica):
    the counted memory times the allocator factor fitted here. beta: GRPO's KL weight (a
    full fine-tune then holds a reference model)."""
    name, _ = parse_gpu(gpu)
    factor = fitted().allocator_factor
    need = memory_estimate_gb(
        preset,
        lora,
        prompt_tokens,
        completion_tokens,
        batch,
        terms or MEASURED_TERMS["grpo"],
        factor,
        teacher_params,
        beta=beta,
        lora_rank=lora_rank,
    )
    have = GPU_MEMORY_GB.get(name)  # None: a type from a price override, memory unknown
    fits = None if have is None else need <= have
    return {"gpu": name, "need_gb": round(need, 1), "have_gb": have, "fits": fits}
