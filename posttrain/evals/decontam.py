"""Decontamination: held-out tasks the model may have seen in training are not evidence.

A held-out task is dropped when a training row has the same id, the same normalised prompt
text, or shares at least 80% of the task's word 8-grams. Held-out tasks that repeat one
another are merged (the same prompt twice is one task, not two).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

NGRAM = 8
OVERLAP = 0.8
_WORDS = re.compile(r"[a-z0-9']+")


def normalise(text: str) -> str:
    return " ".join(_WORDS.findall(str(text).lower()))


def ngrams(text: str, n: int = NGRAM) -> set[tuple[str, ...]]:
    words = normalise(text).split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class Decontamination:
    kept: list[dict[str, Any]]
    same_id: int = 0
    same_text: int = 0
    ngram_overlap: int = 0
    duplicates: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return self.same_id + self.same_text + self.ngram_overlap


def decontaminate(
    holdout: Iterable[dict[str, Any]],
    train: Iterable[dict[str, Any]],
    text_key: str = "prompt_text",
) -> Decontamination:
    train = list(train)
    ids = {str(r.get("id")) for r in train}
    texts = {normalise(r.get(text_key, "")) for r in train}
    grams: set[tuple[str, ...]] = set()
    for r in train:
        grams |= ngrams(r.get(text_key, ""))
    result = Decontamination(kept=[])
    seen: set[str] = set()
    for row in holdout:
        text = normalise(row.get(text_key, ""))
        mine = ngrams(text)
        if str(row.get("id")) in ids:
            result.same_id += 1
        elif text in texts:
            result.same_text += 1
        elif mine and len(mine & grams) / len(mine) >= OVERLAP:
            result.ngram_overlap += 1
        elif text in seen:
            result.duplicates += 1
            continue
        else:
            seen.add(text)
            result.kept.append(row)
            continue
        if len(result.examples) < 3:
            result.examples.append(row.get(text_key, "")[:120])
    return result
