"""On-policy distillation: the student samples answers and learns a teacher's next-token
distribution on them (posttrain.gpu.distill_trainer); no reward."""

from __future__ import annotations

from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.models.catalog import StepTerms, shape_of, vocabulary_of


def _check(a: Any) -> None:
    if not a.teacher:
        raise ValueError(
            "kind 'distill' needs algorithm.teacher: the model whose next-token "
            "distribution the student learns (e.g. Qwen3-8B for a Qwen3-0.6B student)"
        )


def teacher_note(spec: Any) -> str:
    """What a distillation's teacher costs, and what could not be checked about it."""
    a, student = spec.algorithm, shape_of(spec.model.name)
    teacher = shape_of(a.teacher or "")
    if teacher is None or student is None:
        size = (
            f"the teacher {a.teacher}'s size is unknown here, so its forward pass is priced as "
            f"the student's"
        )
    else:
        share = teacher.n_params / (3 * student.n_params + teacher.n_params)
        size = (
            f"the teacher {a.teacher} ({teacher.n_params / 1e9:.1f}B parameters) runs a forward "
            f"pass over every sampled answer: about {share:.0%} of a step's training compute "
            f"(generation aside), and its weights are in memory beside the student's"
        )
    checked = (
        "its tokenizer is the student's family"
        if vocabulary_of(a.teacher or "") is not None
        else "its tokenizer's family is unknown here: the trainer compares the two "
        "vocabularies before the teacher's weights load"
    )
    return (
        f"distillation: no reward; {size}; {checked}. evaluate compares the student's "
        f"held-out answers' likelihood (reference_nll) where the rows have references"
    )


DISTILL = Algorithm(
    name="distill",
    title="distillation",
    summary="on-policy distillation: the student answers, a teacher's next-token "
    "distribution is the target",
    rows="prompts",
    step=StepTerms(
        "grpo",
        samples=True,
        priced_note=(
            "DISTILL is priced as a GRPO step of one sample a prompt plus the teacher's "
            "forward pass over its tokens (2 FLOPs a teacher parameter a token), not measured "
            "itself"
        ),
    ),
    # GRPO's step with one sample a prompt, plus a stand-in teacher's forward pass; not
    # measured by bench/smoke.py, set above GRPO's
    local_step_s={"tiny": 0.5, "stand_in": 4.0},
    headline_metric="reference_nll",
    dry_proves="the student sampled answers and learned a stand-in teacher's distribution on them",
    dry_cannot=(
        "that the teacher teaches: the teacher is a random-weight stand-in of its family too, "
        "so the divergence here says nothing of the real pair; nor the teacher's memory and "
        "time beside the student (a modal smoke run measures them)"
    ),
    own_fields=("teacher",),
    check=_check,
    plan_note=teacher_note,
)
