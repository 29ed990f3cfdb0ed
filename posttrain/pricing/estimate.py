"""How long a run will take, from what was measured: finished runs of the same shape first,
else the step model fitted to the calibration table (posttrain/models/calibration.py).

Measured accuracy (`python -m pytest tests/test_estimate.py -k anchors`): at the two shapes
measured on an H200 the model reproduces the measurement by construction (GRPO Qwen3-0.6B,
64 x 256 tokens: 24.5 s a step against 23-26 s measured; SFT Qwen3-1.7B, 8 x 2,048 tokens:
0.83 s against 0.83 s). Away from them it is an extrapolation no measurement has checked
yet, and its uncertainty grows with the distance: x1.15 at an anchor, more per doubling of
parameters or tokens and for a GPU type never measured (`uncertainty()`). A finished run of
the same shape replaces the model with its own steady step time.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.algorithms.kinds import algorithm_of
from posttrain.algorithms.sft import SFT
from posttrain.models.calibration import (
    CPU_MACHINE,
    MEASUREMENTS,
    STEP_OVERHEAD_S,
    cpu_fitted,
    cpu_step_s,
    decode_step_s,
    fitted,
    training_s,
)
from posttrain.models.catalog import GPU_PERF, get_preset, parse_gpu, priced_as, shape_of
from posttrain.spec.schema import RunSpec

STARTUP_S = 180.0  # Modal container start, image pull and weights download, measured coarsely
PROMPT_TOKENS_GUESS = 128  # prompts are usually far shorter than max_prompt_length
MAX_UNCERTAINTY = 4.0
# Local steps of the tiny demo model and a stand-in: each algorithm's own figures
# (Algorithm.local_step_s, measured on 2 CPU cores by bench/smoke.py where it says so). Real
# weights on this CPU are priced by their shape (calibration.cpu_step_s).
LOCAL_STARTUP_S = {"tiny": 15.0, "stand_in": 25.0, "real": 30.0}
UNKNOWN_LOCAL_STEP_S = 30.0
UNKNOWN_SHAPE_STEP_S = 30.0
CPU_ANCHOR_UNCERTAINTY = 1.3  # the 135M's own steps vary this much on a shared machine


@dataclass
class StepEstimate:
    step_s: float  # seconds per training step, the point estimate
    factor: float  # the step may take step_s x factor (or / factor)
    startup_s: float
    warm_step_s: float  # seconds per warm-start SFT step (0 without one)
    basis: str
    runs_used: list[str] = field(default_factory=list)


def tokens_per_step(spec: RunSpec) -> int:
    """The tokens one GPU trains on a step: its share of the batch (the spec's batch is that of
    all GPUs together, posttrain.spec.batch), each prompt and completion."""
    a = spec.algorithm
    prompt = min(PROMPT_TOKENS_GUESS, a.max_prompt_length)
    return spec.batch_per_gpu * (prompt + a.max_completion_length)


def model_step_s(spec: RunSpec, gpu: str) -> float:
    """The calibrated step model for one GPU of this type, on its share of the batch (under
    data parallel the GPUs step together; posttrain.tools.plan adds their all-reduce)."""
    fit = fitted()
    a = spec.algorithm
    name = spec.model.name
    algorithm = algorithm_of(a)
    _, more = priced_as(algorithm.step)
    teacher = teacher_params(spec)
    kl = algorithm.kl(a)
    train = more * training_s(name, gpu, tokens_per_step(spec), kl, fit.training_mfu, teacher)
    if not algorithm.samples:
        return train  # the SFT measurement the MFU was fitted to includes everything
    decode = decode_step_s(name, gpu, fit.decode_overhead_s_per_layer)
    generate = a.max_completion_length * decode * fit.trl_generation_factor
    return generate + train + STEP_OVERHEAD_S


def teacher_params(spec: RunSpec) -> int:
    """A distillation teacher's parameters (its forward pass is priced by them): its preset's
    or its folder's; the student's own where nothing here says (the plan says so); 0 for the
    other kinds (only distillation takes a teacher)."""
    teacher = spec.algorithm.teacher
    if not teacher:
        return 0
    shape = shape_of(teacher) or shape_of(spec.model.name)
    return shape.n_params if shape is not None else 0


def uncertainty(spec: RunSpec, gpu: str) -> tuple[float, str]:
    """How far the model may be off for this shape, and why."""
    algorithm = algorithm_of(spec)
    kind, _ = priced_as(algorithm.step)
    anchor = next(m for m in MEASUREMENTS if m.what == kind)
    preset, anchored = get_preset(spec.model.name), get_preset(anchor.model)
    assert preset is not None and anchored is not None
    params = abs(math.log2(preset.n_params / anchored.n_params))
    tokens = abs(
        math.log2(
            tokens_per_step(spec)
            / (anchor.batch * (anchor.prompt_tokens + anchor.completion_tokens))
        )
    )
    measured_gpus = {m.gpu for m in MEASUREMENTS}
    factor = 1.15 + 0.35 * params + 0.15 * tokens + (0.3 if gpu not in measured_gpus else 0.0)
    factor += 0.3 if not algorithm.step.measured else 0.0
    why = [f"x{factor:.2f}: the nearest measurement is {anchor.what.upper()} {anchor.model}"]
    if not algorithm.step.measured:
        why.append(algorithm.step.priced_note)
    if params >= 0.5:
        why.append(_times(preset.n_params / anchored.n_params, "its parameters"))
    if tokens >= 0.5:
        spec_tokens = tokens_per_step(spec)
        anchor_tokens = anchor.batch * (anchor.prompt_tokens + anchor.completion_tokens)
        why.append(_times(spec_tokens / anchor_tokens, "its tokens a step"))
    if gpu not in measured_gpus:
        known = gpu in GPU_PERF
        why.append(
            f"on {anchor.gpu}, scaled to {gpu} by bandwidth and FLOP/s"
            + ("" if known else f" (none known for {gpu}: the H100's figures are used)")
        )
    return min(factor, MAX_UNCERTAINTY), ", ".join(why)


def _times(ratio: float, what: str) -> str:
    """ "2.0x its tokens" or "1/2.0 of its tokens": the direction said, never only the size."""
    return f"{ratio:.1f}x {what}" if ratio >= 1 else f"1/{1 / ratio:.1f} of {what}"


def step_estimate(spec: RunSpec, measured: list[dict[str, Any]] | None = None) -> StepEstimate:
    """Seconds per step and start-up: finished runs of this shape first, else the model."""
    shape = spec.shape
    same = [m for m in measured or [] if m["shape"] == shape and m.get("steady_step_s")]
    warm = spec.algorithm.warmstart
    if same:
        steps = [m["steady_step_s"] for m in same]
        startups = [m["startup_s"] for m in same if m.get("startup_s") is not None]
        warms = [m["warm_step_s"] for m in same if m.get("warm_step_s")]
        spread = (max(steps) / min(steps)) if len(steps) > 1 else 1.0
        ids = [m["run_id"] for m in same][:5]
        return StepEstimate(
            step_s=statistics.median(steps),
            factor=max(1.1, spread),
            startup_s=statistics.median(startups) if startups else _startup(spec),
            warm_step_s=statistics.median(warms) if warms else _warm_step_s(spec),
            basis=f"measured: the median steady step of {len(same)} finished run(s) of this "
            f"exact shape ({', '.join(ids)})",
            runs_used=ids,
        )
    if spec.compute.backend == "local" and _local_kind(spec) == "real":
        return _cpu_estimate(spec)
    if spec.compute.backend == "local":
        kind = _local_kind(spec)
        step = algorithm_of(spec).local_step_s[kind] if kind else UNKNOWN_LOCAL_STEP_S
        return StepEstimate(
            step_s=step,
            factor=1.5 if kind else 3.0,
            startup_s=LOCAL_STARTUP_S.get(kind or "", 60.0),
            warm_step_s=SFT.local_step_s[kind] if kind and warm else 0.0,
            basis=f"measured on 2 CPU cores (bench/smoke.py) for {kind or 'no such'} runs; "
            f"this machine's own runs replace it once one of this shape has finished",
        )
    gpu, _ = parse_gpu(spec.gpu)
    if spec.model.preset is None:
        return StepEstimate(
            step_s=UNKNOWN_SHAPE_STEP_S,
            factor=MAX_UNCERTAINTY,
            startup_s=STARTUP_S,
            warm_step_s=UNKNOWN_SHAPE_STEP_S if warm else 0.0,
            basis=f"a guess: {spec.model.name} is not a preset, so its shape (layers, "
            f"parameters) is unknown here; uncertain x{MAX_UNCERTAINTY:g}. Its own finished "
            f"runs replace the guess",
        )
    factor, why = uncertainty(spec, gpu)
    anchor_gpus = sorted({m.gpu for m in MEASUREMENTS})
    scaled = "" if gpu in anchor_gpus else f", scaled to {gpu} by bandwidth and FLOP/s"
    return StepEstimate(
        step_s=model_step_s(spec, gpu),
        factor=factor,
        startup_s=STARTUP_S,
        warm_step_s=_warm_step_s(spec) if warm else 0.0,
        basis=f"the step model calibrated on {', '.join(anchor_gpus)} measurements (plain TRL "
        f"1.16, HF generate){scaled}; uncertainty {why}",
    )


def _local_kind(spec: RunSpec) -> str | None:
    """tiny, stand_in, real (weights whose shape is known: a preset, a folder, a .gguf), or
    None (a hub id whose shape nothing here says)."""
    preset = spec.model.preset
    if preset is not None and preset.hf_repo is None:
        return "tiny"
    if spec.model.stand_in:
        return "stand_in"
    return "real" if shape_of(spec.model.name) is not None else None


def _cpu_step(spec: RunSpec, algorithm: Algorithm, batch: int) -> float:
    shape = shape_of(spec.model.name)
    assert shape is not None
    a = spec.algorithm
    prompt = min(PROMPT_TOKENS_GUESS, a.max_prompt_length)
    kl = algorithm.kl(a)
    mine = algorithm is algorithm_of(a)
    teacher = teacher_params(spec) if mine else 0  # not in a warm-start's step
    return cpu_step_s(
        shape.n_params, algorithm.step, batch, prompt, a.max_completion_length, kl, teacher
    )


def _cpu_estimate(spec: RunSpec) -> StepEstimate:
    """Real weights on this machine's CPU: the step priced from the model's shape at the
    rates fitted to the 135M's measured runs."""
    shape = shape_of(spec.model.name)
    assert shape is not None
    a, warm = spec.algorithm, spec.algorithm.warmstart
    algorithm = algorithm_of(a)
    kind, _ = priced_as(algorithm.step)
    anchor = next(m for m in cpu_fitted().anchors if m.what == kind)
    anchored = get_preset(anchor.model)
    assert anchored is not None
    params = abs(math.log2(shape.n_params / anchored.n_params))
    tokens = abs(math.log2(tokens_per_step(spec) / (anchor.batch * anchor.completion_tokens)))
    factor = min(MAX_UNCERTAINTY, CPU_ANCHOR_UNCERTAINTY + 0.35 * params + 0.15 * tokens)
    why = f"x{factor:.2f}: the nearest measurement is {anchor.what.upper()} {anchor.model}"
    if params >= 0.5:
        why += ", " + _times(shape.n_params / anchored.n_params, "its parameters")
    if not algorithm.step.measured:
        factor = min(MAX_UNCERTAINTY, factor + 0.3)
        why += ", " + algorithm.step.priced_note
    return StepEstimate(
        step_s=_cpu_step(spec, algorithm, a.batch_size),
        factor=factor,
        startup_s=LOCAL_STARTUP_S["real"],
        warm_step_s=_cpu_step(spec, SFT, warm.batch_size) if warm else 0.0,
        basis=f"{shape.n_params / 1e6:,.0f}M parameters on this machine's CPU ({CPU_MACHINE}), "
        "at the rates fitted to measured runs (posttrain/models/calibration.py); "
        f"uncertainty {why}. "
        f"This machine's own runs of this shape replace it once one has finished",
    )


def _startup(spec: RunSpec) -> float:
    if spec.compute.backend == "local":
        return LOCAL_STARTUP_S.get(_local_kind(spec) or "", 60.0)
    return STARTUP_S


def _warm_step_s(spec: RunSpec) -> float:
    """An SFT warm-start step of the same model, batch and lengths."""
    warm = spec.algorithm.warmstart
    if warm is None:
        return 0.0
    if spec.compute.backend == "local":
        kind = _local_kind(spec)
        if kind == "real":
            return _cpu_step(spec, SFT, warm.batch_size)
        return SFT.local_step_s[kind] if kind else UNKNOWN_LOCAL_STEP_S
    sft = spec.model_copy(
        update={
            "algorithm": spec.algorithm.model_copy(
                update={"kind": SFT.name, "batch_size": warm.batch_size, "warmstart": None}
            )
        }
    )
    return model_step_s(sft, parse_gpu(spec.gpu)[0])
