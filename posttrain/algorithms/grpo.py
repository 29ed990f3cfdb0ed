"""GRPO: reinforcement learning from a reward (or an environment's episodes) on sampled
answers, through TRL's GRPOTrainer (posttrain.gpu.trainers.run_grpo)."""

from __future__ import annotations

from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.models.catalog import StepTerms


def _check(a: Any) -> None:
    if a.batch_size % a.num_generations:
        suggestion = a.num_generations * max(1, a.batch_size // a.num_generations)
        raise ValueError(
            f"batch_size ({a.batch_size}) must be divisible by num_generations "
            f"({a.num_generations}): each prompt gets num_generations completions; e.g. "
            f"batch_size {suggestion}"
        )


def _plan_note(spec: Any) -> str | None:
    if "reward" not in spec.model_fields_set and spec.reward is not None:
        return (
            f"reward: none given, so GRPO maximises the default '{spec.reward.name}'; name "
            f"the reward your task needs"
        )
    return None


GRPO = Algorithm(
    name="grpo",
    title="GRPO",
    summary="reinforcement learning from a reward (or an environment) on sampled answers",
    rows="prompts",
    step=StepTerms("grpo", reference="kl", samples=True),
    local_step_s={"tiny": 0.4, "stand_in": 3.6},
    headline_metric="reward",
    dry_proves="the reward scored every completion",
    rewarded=True,
    takes_environment=True,
    takes_warmstart=True,
    check=_check,
    plan_note=_plan_note,
)
