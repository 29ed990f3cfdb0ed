"""Specs the tests share: the smallest run that trains for real on the tiny model, and a paid
launch for the approval and money-path tests."""

from __future__ import annotations

from typing import Any

TINY_RUN: dict[str, Any] = {
    "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "steps": 3,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 16,
        "save_every": 0,
        "traces": {"every": 0, "samples": 2},
    },
}

# A full fine-tune of the tiny model small enough for a CPU, yet one that moves its
# likelihoods: the preference kinds' evaluations train it.
SMALL_FULL_RUN: dict[str, Any] = {
    "lora": None,
    "steps": 8,
    "batch_size": 8,
    "learning_rate": 5e-4,
    "max_completion_length": 24,
    "save_every": 0,
}

EVAL_RUN: dict[str, Any] = {  # a warm-started run with enough held-out tasks to evaluate
    "dataset": {
        "builtin": "rhyme-gym",
        "n_rows": 600,
        "system_prompt": "answer in rhyme",
        "response_column": "response",
        "holdout_share": 0.2,
    },
    "reward": "rhyme_relevance",
    "algorithm": {
        **TINY_RUN["algorithm"],
        "batch_size": 16,
        "max_completion_length": 24,
        "warmstart": {"steps": 20, "learning_rate": 2e-3, "batch_size": 32},
    },
}

PAID: dict[str, Any] = {
    "model": "Qwen3-0.6B",
    "dataset": {"builtin": "rhyme-gym"},
    "compute": {"backend": "modal", "timeout_s": 3600},
}  # L40S: worst case $1.95


def tiny(**algorithm: Any) -> dict[str, Any]:
    """TINY_RUN with some algorithm fields changed."""
    return {**TINY_RUN, "algorithm": {**TINY_RUN["algorithm"], **algorithm}}


# The smoke run an MCP client plans, checks and starts (tests/server), and the fork server's
# runs (tests/runs).
SMOKE_SPEC = {
    "model": "tiny-local",
    "dataset": {"builtin": "rhyme-gym", "n_rows": 100, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "lora": None,
        "learning_rate": 5e-4,
        "max_completion_length": 24,
        "traces": {"samples": 3},
    },
}


def feedback_spec(path: str = "feedback.jsonl", **algorithm: Any) -> dict[str, Any]:
    """KTO on a support bot's thumbs-up/down export, in the product's own column names
    (`question`, `bot_reply`, `rating`), on a Qwen3 stand-in's family."""
    return {
        "model": "Qwen3-0.6B",
        "dataset": {
            "path": path,
            "prompt_column": "question",
            "response_column": "bot_reply",
            "label_column": "rating",
            **algorithm.pop("dataset", {}),
        },
        "algorithm": {"kind": "kto", **algorithm},
    }


def small_full_run(kind: str, **columns: str) -> dict[str, Any]:
    """SMALL_FULL_RUN of `kind` on the rhyme gym's prompts, its rows' own `columns`, 30% of
    them held out for evaluate."""
    dataset = {"system_prompt": "answer in rhyme", "holdout_share": 0.3, **columns}
    return {"dataset": dataset, "algorithm": {"kind": kind, **SMALL_FULL_RUN}}
