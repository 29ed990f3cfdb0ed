"""The preference gym: pairs a rater would judge on tone, that a small model can learn from.

Each prompt asks about a topic; both answers state the same thing about it, the chosen one
warmly (a friendly opening, the answer, an offer of more help), the rejected one curtly (the
answer, a dismissive closing). The openings and closings are drawn from pools, and the two
answers' lengths are matched within a few tokens, so neither side is simply the longer one
(`data check` shows no length bias), and a base model prefers either at about the rate its
pools' wording happens to suit it. Nothing is downloaded: the rows come from a seeded
generator. `bench/dpo.py` trains SmolLM2-135M on them with DPO and evaluates held-out
preference accuracy over 3 seeds.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

TOPICS: tuple[str, ...] = tuple(
    "tea coffee bread cheese rice soup honey apples lemons salt maps clocks bridges trains "
    "bicycles kites candles mirrors magnets compasses batteries violins drums pianos chess "
    "gardens forests rivers deserts glaciers volcanoes islands caves tides clouds rainbows "
    "thunder snow comets planets owls bees ants whales dolphins penguins foxes wolves horses "
    "cats dogs parrots turtles frogs spiders moss ferns tulips cactus bamboo oaks".split()
)
QUESTIONS: tuple[str, ...] = (
    "What is one thing worth knowing about {t}?",
    "Tell me something about {t}.",
    "Why do people find {t} interesting?",
    "Give me a fact about {t}.",
    "What should a beginner know about {t}?",
)
FACTS: tuple[str, ...] = (
    "{T} have a long history, and people have studied them for centuries",
    "{T} come in many kinds, and each kind has its own character",
    "{T} change with the seasons, which makes them worth watching all year",
    "{T} appear in stories from many cultures around the world",
    "{T} are easiest to understand by looking closely at a few examples",
)
WARM_OPENINGS: tuple[str, ...] = (
    "Great question!",
    "Happy to help!",
    "Good one!",
    "Glad you asked!",
)
WARM_CLOSINGS: tuple[str, ...] = (
    "Want to hear more?",
    "Shall I go on?",
    "Ask me anything else!",
    "Hope that helps!",
)
CURT_CLOSINGS: tuple[str, ...] = (
    "That is all. Do not ask again.",
    "Look it up yourself next time.",
    "Obviously. Everyone knows that.",
    "Fine. Now stop asking me.",
)


def rows(n: int = 300, seed: int = 0) -> list[dict[str, Any]]:
    """n preference rows (at most one per topic and question: 300): prompt, chosen (warm),
    rejected (curt), with a stable id. Every prompt is distinct, so evaluate's
    decontamination keeps every held-out pair."""
    rng = random.Random(seed)
    asked = [(t, q) for q in QUESTIONS for t in TOPICS]
    if n > len(asked):
        raise ValueError(f"the preference gym has {len(asked)} distinct prompts, not {n}")
    rng.shuffle(asked)
    out = []
    for i, (topic, template) in enumerate(asked[:n]):
        question = template.format(t=topic)
        fact = rng.choice(FACTS).format(T=topic.capitalize())
        warm = f"{rng.choice(WARM_OPENINGS)} {fact}. {rng.choice(WARM_CLOSINGS)}"
        curt = f"{fact}. {rng.choice(CURT_CLOSINGS)}"
        out.append({"id": f"pref-{seed}-{i}", "prompt": question, "chosen": warm, "rejected": curt})
    return out


def write(folder: Path, n: int = 300, seed: int = 0) -> Path:
    """The rows as a JSONL file in `folder`; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "preferences.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(n, seed)), encoding="utf-8")
    return path
