"""The local dry-run demo: the real pipeline on the tiny model, on this machine, for free.

Build the tiny Qwen3-shaped model, warm-start it with SFT on the rhyme gym (answers that
rhyme only 30% of the time: it learns the four-line format, not the rhymes), then GRPO with
the canonical rhyme_relevance reward (relevance gating the rhyme, four lines) until it
rhymes: 250 GRPO steps, 43-53 s on 2 CPU cores (the warm-start 14-16 s; measured 2026-12-03,
relevance embedded in bfloat16; 124 s and 32 s the day before, float32, a slower machine).

The tiny model trains all its weights (lora: null): measured here, LoRA r=32 on a 0.6M
model did not learn the rhymes within 300 steps, while the full fine-tune did in every
seed tried. The Qwen presets default to LoRA.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from posttrain.data import gym

# GRPO at 1e-3, decaying linearly to 0 over the run, finds the rhymes by step 100-150 and keeps
# them. Measured 2026-12-02 on an AMD EPYC, the reward below, 4 seeds at 1 thread each: mean
# rhyme over the first 10 steps 0.03-0.05, over the last 10 of 250 steps 0.58-0.66, answers at
# ~20 tokens throughout. At a constant 5e-4 the rhymes came between steps 150 and 250 (seeds
# 0-2), hence 400 steps then; at a constant 1e-3 they came by step 75-125 but seed 1 drifted
# to 40-token answers at steps 125-250 before it came back.
# Measured again 2026-12-07 on torch 2.13's CPU build: seed 1 never rhymed. Its first step
# (Adam's: every weight moved by ~lr, whatever its gradient) took KL to 2.9 and the answers to
# 37 tokens at once, and they stayed there (a seed-1 arm of the demo experiment scored 0.02).
# The same seed on 2026-12-02's torch build rhymed: the demo sat on an edge. The rate now rises
# over the first tenth of the steps (25 of 250); seeds 0-3 each rhyme again (docs/demo.md).
DEMO_STEPS = 250
DEMO_LEARNING_RATE = 1e-3
DEMO_WARMUP_SHARE = 0.1
DEMO_WARMSTART_STEPS = 250  # 2,000 rows x 4 epochs / batch 32
# What the tiny policy learns before it finds rhymes decides the demo. Measured 2026-12-02 on
# an AMD EPYC, 3 seeds each: with the reward's default relevance_weight (0.3), and with 0.1,
# seeds drifted to word salad stuffed with topic words, or to 8-line poems cut off at the
# completion limit (more lines are more topic words and more chances at a rhyming pair),
# and never rhymed (seed 0 at 0.3 failed the demo test; seed 1 at 0.1 drifted by step 125,
# also at lr 3e-4). With relevance only gating the rhyme (relevance_weight 0) and a poem
# past 4 lines paid 4/lines (max_lines 4), all three stayed at four lines and rhymed:
# mean rhyme over steps 275-300 0.51, 0.74 and 0.39 (seed 2 dipped to 10-token answers at
# steps 225-275 and came back).
DEMO_REWARD_PARAMS = {"relevance_weight": 0.0, "max_lines": 4}


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
        # The rhyme, gated by relevance, and nothing else (DEMO_REWARD_PARAMS below).
        "reward": {"name": "rhyme_relevance", "params": dict(DEMO_REWARD_PARAMS)},
        "algorithm": {
            "kind": "grpo",
            "lora": None,
            "learning_rate": DEMO_LEARNING_RATE,
            "lr_scheduler": "linear",
            "warmup_steps": int(steps * DEMO_WARMUP_SHARE) or None,
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


# --- The real-model demo: SmolLM2-135M-Instruct learns to call tools -----------------------
#
# Chosen by measurement (2026-12-02, 2 CPU cores shared with the test suite): the 135M base
# rhymes in 1 of 32 sampled four-line poems (0 of 16 couplets), and after a 30-step SFT
# warm-start on the gym's verses in ~3%; a GRPO step of 8 completions takes 20-30 s here,
# so the ~25 steps that fit in ten minutes cannot find rhymes that rare. Asked to call a
# tool, the base never does (0 of 32, even shown the exact format): it chats about the
# weather. Eight SFT warm-start steps teach the format, yet sampled calls still come out
# broken or wrong (reward 0.22 on held-out questions); GRPO with the tool_call reward (right
# tool, right argument) raised that to 0.42 in 24 steps (run-261202-073417-21f8).

REAL_MODEL = "SmolLM2-135M-Instruct"
TOOL_CITIES = tuple(
    "Paris London Tokyo Berlin Madrid Rome Oslo Cairo Lima Dublin Vienna Prague Athens Lisbon "
    "Warsaw Seoul Delhi Nairobi Toronto Sydney Boston Denver Chicago Dallas Miami Seattle "
    "Houston Austin Phoenix Atlanta Munich Milan Naples Porto Geneva Zurich Helsinki "
    "Stockholm Copenhagen Brussels".split()
)
# Each tool takes one argument, the city; the question's wording says which tool it needs.
TOOL_QUESTIONS: dict[str, tuple[str, ...]] = {
    "get_weather": (
        "What is the weather in {city} right now?",
        "Is it raining in {city}?",
        "How warm is it in {city} today?",
        "Do I need an umbrella in {city}?",
    ),
    "get_time": (
        "What time is it in {city}?",
        "What is the local time in {city} now?",
        "Is it morning or evening in {city} right now?",
        "Tell me the current time in {city}.",
    ),
    "get_population": (
        "How many people live in {city}?",
        "What is the population of {city}?",
        "How big is the population of {city}?",
        "How many inhabitants does {city} have?",
    ),
}
# Short: every token of it is trained on and generated after, at ~10 ms a token here.
TOOL_SYSTEM_PROMPT = (
    "Tools: get_weather, get_time, get_population. Answer with one call, like "
    '<tool_call>{"name": "get_time", "arguments": {"city": "Rome"}}</tool_call>'
)
REAL_DEMO_ROWS = 480  # 40 cities x 12 questions
REAL_DEMO_STEPS = 24
REAL_DEMO_WARMSTART_STEPS = 8
# LoRA on the top 8 of SmolLM2's 30 layers: backward stops there and generation carries 56
# adapters instead of 210 (a step took 19 s with all-linear, 10-11 s this way, same machine).
REAL_DEMO_LORA_LAYERS = range(22, 30)
LINEAR_MODULES = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def call_text(name: str, city: str) -> str:
    """The answer a row expects, as the model writes it."""
    call = {"name": name, "arguments": {"city": city}}
    return f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>"


def tool_rows(n: int = REAL_DEMO_ROWS, seed: int = 0) -> list[dict[str, Any]]:
    """Questions that each need one tool call: `prompt`, the expected `tool_call` (the
    reward's label) and its text form `answer` (the warm-start's target, evaluate's
    reference). Every (city, question) pair at most once, in a seeded order."""
    pairs = [
        (city, tool, question)
        for city in TOOL_CITIES
        for tool, questions in TOOL_QUESTIONS.items()
        for question in questions
    ]
    random.Random(seed).shuffle(pairs)
    return [
        {
            "id": f"call-{i}",
            "prompt": question.format(city=city),
            "tool_call": {"name": tool, "arguments": {"city": city}},
            "answer": call_text(tool, city),
        }
        for i, (city, tool, question) in enumerate(pairs[:n])
    ]


def write_tool_rows(folder: Path, seed: int = 0) -> Path:
    """The real demo's data as a JSONL file in `folder` (written once, then reused)."""
    path = folder / f"tool_calls-{seed}.jsonl"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(".tmp")
        staging.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in tool_rows(seed=seed)),
            encoding="utf-8",
        )
        staging.replace(path)
    return path


def real_demo_lora() -> dict[str, Any]:
    """LoRA r16 on the top layers of SmolLM2 (REAL_DEMO_LORA_LAYERS): what a CPU can afford."""
    return {
        "r": 16,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": [
            f"model.layers.{i}.{m}" for i in REAL_DEMO_LORA_LAYERS for m in LINEAR_MODULES
        ],
    }


def real_demo_spec(
    data: Path,
    steps: int = REAL_DEMO_STEPS,
    warmstart_steps: int = REAL_DEMO_WARMSTART_STEPS,
    seed: int = 0,
    learning_rate: float = 5e-4,
) -> dict[str, Any]:
    """The spec of `posttrain demo --real`: SmolLM2-135M-Instruct, SFT warm-start then GRPO
    with the tool_call reward, on this machine."""
    return {
        "name": "real demo: SmolLM2-135M learns to call tools",
        "model": {"name": REAL_MODEL},
        "dataset": {
            "path": str(data),
            "system_prompt": TOOL_SYSTEM_PROMPT,
            "reference_column": "answer",
            "holdout_share": 0.15,  # 60 of the 480 rows: evaluate proves nothing under 50
        },
        "reward": {"name": "tool_call"},
        "algorithm": {
            "kind": "grpo",
            "lora": real_demo_lora(),
            "learning_rate": learning_rate,
            "lr_scheduler": "constant",
            "steps": steps,
            "batch_size": 8,
            "num_generations": 4,
            "max_prompt_length": 80,
            "max_completion_length": 32,
            "temperature": 1.0,
            "beta": 0.0,
            "save_every": 0,
            "seed": seed,
            "sft_loss": "last_turn",  # SmolLM2's template has no {% generation %} markers
            "traces": {"every": 4, "samples": 4},
            "warmstart": {"steps": warmstart_steps, "learning_rate": 1e-3, "batch_size": 8},
        },
        "compute": {"backend": "local", "timeout_s": 1800},
    }
