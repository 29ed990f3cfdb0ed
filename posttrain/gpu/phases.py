"""The spec's training phase, by its algorithm (posttrain.algorithms): each kind's trainer
builder, in a module of its own, named here once."""

from __future__ import annotations

import importlib
from typing import Any

from posttrain.algorithms.distill import DISTILL
from posttrain.algorithms.dpo import DPO
from posttrain.algorithms.grpo import GRPO
from posttrain.algorithms.kinds import algorithm_of
from posttrain.algorithms.kto import KTO
from posttrain.algorithms.sft import SFT
from posttrain.core.errors import ConfigError
from posttrain.gpu.trainers import Job, SftSettings, run_sft

# Each algorithm's trainer, imported when it trains: `run_<kind>(job, resume, extra_callbacks,
# proof)` trains and returns the trainer; a builder `<kind>_trainer(job, extra_callbacks,
# proof)` (BUILT) returns it untrained.
TRAINERS = {
    GRPO.name: "posttrain.gpu.trainers:run_grpo",
    DPO.name: "posttrain.gpu.dpo_trainer:dpo_trainer",
    DISTILL.name: "posttrain.gpu.distill_trainer:distill_trainer",
    KTO.name: "posttrain.gpu.kto_trainer:kto_trainer",
}
BUILT = {DPO.name, KTO.name, DISTILL.name}


def _sft(job: Job, **more: Any) -> Any:
    a = job.spec.algorithm
    settings = SftSettings(
        "train",
        a.steps,
        a.learning_rate,
        a.batch_size,
        a.lr_scheduler,
        a.lora is not None,
        a.warmup_steps or 0,
    )
    return run_sft(job, settings, **more)


def trainer_of(kind: str) -> Any:
    """The function that trains an algorithm's kind."""
    if kind == SFT.name:
        return _sft
    if kind not in TRAINERS:
        raise ConfigError(f"algorithm.kind '{kind}' has no trainer here")
    module, name = TRAINERS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def train_phase(
    job: Job,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """The spec's training, from `resume` when given; returns the trainer."""
    kind = algorithm_of(job.spec).name
    if kind in BUILT:
        trainer = trainer_of(kind)(job, extra_callbacks, proof)
        trainer.train(resume_from_checkpoint=resume)
        return trainer
    more = {"resume": resume, "extra_callbacks": extra_callbacks, "proof": proof}
    return trainer_of(kind)(job, **more)
