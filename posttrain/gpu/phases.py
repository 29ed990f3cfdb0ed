"""The spec's training phase, by its algorithm's kind: GRPO and SFT (posttrain.gpu.trainers),
DPO (posttrain.gpu.dpo), on-policy distillation (posttrain.gpu.distill)."""

from __future__ import annotations

from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.gpu.distill import run_distill
from posttrain.gpu.dpo import run_dpo
from posttrain.gpu.trainers import Job, SftSettings, run_grpo, run_sft


def train_phase(
    job: Job,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """The spec's training (GRPO, SFT, DPO or distillation), from `resume` when given; returns the
    trainer."""
    a = job.spec.algorithm
    more = {"resume": resume, "extra_callbacks": extra_callbacks, "proof": proof}
    if a.kind == "grpo":
        return run_grpo(job, **more)
    if a.kind == "dpo":
        return run_dpo(job, **more)
    if a.kind == "distill":
        return run_distill(job, **more)
    if a.kind != "sft":
        raise ConfigError(f"algorithm.kind '{a.kind}' has no trainer here")
    settings = SftSettings(
        "train", a.steps, a.learning_rate, a.batch_size, a.lr_scheduler, a.lora is not None
    )
    return run_sft(job, settings, **more)
