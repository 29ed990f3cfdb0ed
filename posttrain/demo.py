"""The local dry-run demo: the real pipeline on the tiny model, on this machine, for free.

Build the tiny Qwen3-shaped model, warm-start it with SFT on the rhyme gym (answers that
rhyme only 30% of the time: it learns the four-line format, not the rhymes), then GRPO with
the canonical rhyme_relevance reward until it rhymes. About 3 minutes on 2 CPU cores
(174 s measured for 400 steps).

The tiny model trains all its weights (lora: null): measured here, LoRA r=32 on a 0.6M
model did not learn the rhymes within 300 steps, while the full fine-tune did in every
seed tried. The Qwen presets default to LoRA.
"""

from __future__ import annotations

from typing import Any

from posttrain import gym

# The reward sits flat, then rises within ~50 steps; when depends on the seed and the CPU's
# arithmetic: by step ~250 on an AMD EPYC (DESIGN.md), between steps 200 and 340 across
# seeds 0-2 on an Intel Xeon (measured 2026-12-01). 400 leaves room for every seed tried.
DEMO_STEPS = 400
DEMO_WARMSTART_STEPS = 250  # 2,000 rows x 4 epochs / batch 32


def demo_spec(
    steps: int = DEMO_STEPS, warmstart_steps: int = DEMO_WARMSTART_STEPS, seed: int = 0
) -> dict[str, Any]:
    """The embedded default spec of `posttrain demo` (a plain dict, so it can be shown)."""
    return {
        "name": "demo: tiny model learns to rhyme",
        "model": {"name": "tiny-local"},
        "dataset": {
            "builtin": "rhyme-gym",
            "n_rows": 2000,
            "system_prompt": gym.SYSTEM_PROMPT,
            "reference_column": "reference",
            "response_column": "response",
            "holdout_share": 0.1,
        },
        "reward": {"name": "rhyme_relevance"},
        "algorithm": {
            "kind": "grpo",
            "lora": None,
            "learning_rate": 5e-4,
            "lr_scheduler": "constant",
            "steps": steps,
            "batch_size": 32,
            "num_generations": 8,
            "max_prompt_length": 64,
            "max_completion_length": 40,
            "temperature": 1.0,
            "beta": 0.04,
            "save_every": 100,
            "seed": seed,
            "traces": {"every": 25, "samples": 8},
            "warmstart": {"steps": warmstart_steps, "learning_rate": 2e-3, "batch_size": 32},
        },
        "compute": {"backend": "local", "timeout_s": 3600},
    }
