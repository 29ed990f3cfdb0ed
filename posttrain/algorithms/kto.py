"""KTO: training on single answers marked good or bad (thumbs up or down, the feedback real
products collect), through TRL's KTOTrainer (posttrain.gpu.kto_trainer). No pairs, no reward:
desirable answers are made likelier than the reference finds them, undesirable ones less.
With LoRA the reference is the base, adapter off."""

from __future__ import annotations

from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.data.kto_rows import kto_columns, kto_row
from posttrain.data.kto_settings import KtoSpec
from posttrain.models.catalog import StepTerms


def _per_gpu_floor(a: Any) -> tuple[int, str]:
    if not a.kto.estimates_kl:
        return 1, ""
    return 2, (
        "KTO's loss estimates its reference point from the other answers in a GPU's batch: "
        "give each GPU 2 rows or more (batch_size >= 2 x GPUs), or set "
        "algorithm.kto.loss_type: apo_zero_unpaired (no KL term)"
    )


def _shape_row(row: dict[str, Any], ds: Any) -> dict[str, Any]:
    return kto_row(row, ds, ds.label)


def _row_columns(ds: Any, rows: list[dict[str, Any]]) -> list[str]:
    return kto_columns(ds, rows, ds.label)


PLAN_WORDS = (
    "KTO trains on answers labelled good or bad, with no reward; evaluate compares the "
    "trained and base models on held-out rows: good answers should grow likelier and bad "
    "ones less likely (feedback_loglik, paired, with an interval). Run `posttrain data check` "
    "first: it flags empty answers, labels it cannot read, one-sided data and an imbalance"
)


KTO = Algorithm(
    name="kto",
    title="KTO",
    summary="training on single answers labelled good or bad (thumbs up or down)",
    rows="labelled",
    # A forward and backward pass over the answers, the policy's forward pass over the KL
    # batch (each answer under another prompt, no gradient) and the reference's over both:
    # about twice an SFT step's compute; derived, not measured.
    step=StepTerms(
        "sft",
        compute=2.0,
        reference="always",
        priced_note=(
            "KTO is priced as 2.00x an SFT step of the same batch (the KL batch's and the "
            "reference's forward passes beside the training pass), not measured itself"
        ),
    ),
    local_step_s={"tiny": 0.2, "stand_in": 3.0},
    headline_metric="feedback_loglik",
    unoptimised_metrics=("desirable_loglik", "undesirable_loglik", "reference_nll"),
    dry_proves="every labelled answer trained on the tokens `data check` shows",
    dry_cannot=(
        "that the labels teach what you mean: a random-weight stand-in finds good and bad "
        "answers equally likely, so its rewards and margins are noise; read the flags of "
        "`data check` (empty answers, one-sided or imbalanced labels) and evaluate held-out "
        "rows on the real model"
    ),
    section=("kto", KtoSpec),
    per_gpu_floor=_per_gpu_floor,
    plan_words=PLAN_WORDS,
    loss_words="KTO: each answer's log-likelihood against the reference's (the base, its "
    "adapter off), raised for answers labelled good and lowered for those labelled bad "
    "(the prompt carries none)",
    shape_row=_shape_row,
    row_columns=_row_columns,
)
