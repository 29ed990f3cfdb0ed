"""SFT: supervised fine-tuning on target answers or whole chats (tool calls included),
through TRL's SFTTrainer (posttrain.gpu.trainers.run_sft); the loss falls where `data check`
marks it (algorithm.sft_loss)."""

from __future__ import annotations

from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.models.catalog import StepTerms


def _plan_note(spec: Any) -> str | None:
    if spec.reward is None:
        return (
            "no reward: SFT trains without one, and evaluate compares the trained and base "
            "models by the held-out references' likelihood (reference_nll, lower is better); "
            "name a reward (e.g. tool_call) to have evaluate score sampled answers too"
        )
    return None


SFT = Algorithm(
    name="sft",
    title="SFT",
    summary="supervised fine-tuning on target answers or chats",
    rows="targets",
    step=StepTerms("sft"),
    local_step_s={"tiny": 0.1, "stand_in": 2.5},
    headline_metric="reference_nll",
    dry_proves="the loss fell where `data check` marks it",
    takes_tools_column=True,
    plan_note=_plan_note,
)
