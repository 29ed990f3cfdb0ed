"""Decontamination: held-out tasks the model may have seen in training are not evidence.

A held-out task is dropped when a training row has the same id, the same normalised prompt
text, or shares at least 80% of the task's own word 8-grams. Held-out tasks that repeat one
another are merged (the same prompt twice is one task, not two).

"Own": an 8-gram that a fifth of the training rows share (at least 3 of them) is the prompt
template's or the instructions', not a task's, and counts on neither side. Without that, a
template of 40 words around a 6-word question made every new question 85% "seen" (measured:
a labelling spec's 20 new held-out reviews all dropped, and evaluate refused the file).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

NGRAM = 8
OVERLAP = 0.8
BOILERPLATE_SHARE, BOILERPLATE_ROWS = 0.2, 3  # an 8-gram in this many training rows: template
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
    boilerplate: int = 0  # 8-grams shared by so many training rows that they are the template's

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
    rows_with: Counter[tuple[str, ...]] = Counter()
    for r in train:
        rows_with.update(ngrams(r.get(text_key, "")))
    floor = max(BOILERPLATE_ROWS, BOILERPLATE_SHARE * len(train))
    boilerplate = {g for g, n in rows_with.items() if n >= floor}
    grams = rows_with.keys() - boilerplate
    result = Decontamination(kept=[], boilerplate=len(boilerplate))
    seen: set[str] = set()
    for row in holdout:
        text = normalise(row.get(text_key, ""))
        mine = ngrams(text) - boilerplate
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
