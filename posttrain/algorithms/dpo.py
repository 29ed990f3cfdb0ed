"""DPO: preference training on pairs of a chosen and a rejected answer, through TRL's
DPOTrainer (posttrain.gpu.dpo_trainer); with LoRA the reference is the base, adapter off."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from posttrain.algorithms.algorithm import Algorithm
from posttrain.models.catalog import StepTerms

DPO_LOSSES = ("sigmoid", "ipo", "hinge", "robust", "sigmoid_norm", "apo_zero", "apo_down")


class DpoSpec(BaseModel):
    """DPO's own settings (TRL's DPOConfig defaults); its lengths are the algorithm's
    max_prompt_length + max_completion_length."""

    model_config = ConfigDict(extra="forbid")

    beta: Annotated[float, Field(gt=0, le=10)] = Field(
        0.1, description="How far from the reference (the base, adapter off) the policy may go."
    )
    loss_type: Literal[DPO_LOSSES] = "sigmoid"  # type: ignore[valid-type]


# Each pair is two sequences (chosen and rejected) through the policy in one batch, and the
# reference's forward pass over both (the base with the adapter off, or a frozen copy): a
# forward pass is ~1/3 of a forward and backward. Derived from the SFT measurement, not
# measured for DPO (the plan's uncertainty says so).
SEQUENCES = 2
REFERENCE_FORWARD_SHARE = 1 / 3


PLAN_WORDS = (
    "DPO trains on the pairs, with no reward; evaluate compares the trained and base "
    "models by held-out preference accuracy (the share of held-out pairs whose chosen "
    "answer each finds likelier), beside the chosen answers' likelihood "
    "(reference_nll: a rise is DPO's known failure). Run `posttrain data check` first: "
    "it flags identical, contradicting and cut-off pairs and a length bias"
)


DPO = Algorithm(
    name="dpo",
    title="DPO",
    summary="preference training on pairs of a chosen and a rejected answer",
    rows="pairs",
    step=StepTerms(
        "sft",
        compute=SEQUENCES * (1 + REFERENCE_FORWARD_SHARE),
        sequences=SEQUENCES,
        reference="always",
        priced_note=(
            f"DPO is priced as {SEQUENCES * (1 + REFERENCE_FORWARD_SHARE):.2f}x an SFT step of "
            f"the same batch (both answers, and the reference's forward pass over them), not "
            f"measured itself"
        ),
    ),
    # a dry run of 22 short pairs (~45 tokens, batch 2) took 0.5-1.7 s a step on the
    # stand-in (2026-12-06); SFT's step for two sequences a row bounds it above
    local_step_s={"tiny": 0.2, "stand_in": 3.0},
    headline_metric="preference_accuracy",
    unoptimised_metrics=("preference_margin", "reference_nll"),
    dry_proves="every pair trained on the tokens `data check` shows",
    dry_cannot=(
        "that the pairs teach what you mean: a random-weight stand-in ranks chosen and "
        "rejected answers by chance, so its margins and preference accuracy are noise; read "
        "the flags of `data check` (length bias, contradicting pairs) and evaluate held-out "
        "preference accuracy on the real model"
    ),
    section=("dpo", DpoSpec),
    plan_words=PLAN_WORDS,
    loss_words="DPO: the loss compares the chosen and the rejected answer's log-likelihood "
    "(the prompt carries none); reference: the base model, its adapter off",
)
