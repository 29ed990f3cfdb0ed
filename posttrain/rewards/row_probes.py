"""Probes built from the user's own rows, for any task: the hacks a reward that checks an
answer can be talked into, whatever the answer is (a number, a label, a sentence).

Each probe is made from the row under test and the other rows of the sample: the reference
buried among other rows' references, every reference at once, the reference taken back or
hedged against another, the prompt's own last number or word, padding, truncation. Where the
references are numbers, a sweep of numbers; where they form a small set (labels), every label
at once. The reference in another form (alone, re-cased, `19.0`, in words) is reported as an
accepted form, never as an exploit: it shows what the reward accepts.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from posttrain.rewards.probe_types import Probe, Row

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MAX_LISTED = 40  # references listed at once
MAX_LABELS = 8  # at most this many distinct references make a label set
SWEEP_TO = 300  # a number sweep counts 0..max(this, twice the largest reference)
SWEEP_CAP = 2000
FILLER_WORDS = 200
WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


def label_set(data: Sequence[Row]) -> list[str]:
    """The references as a set of labels (2 to MAX_LABELS distinct, each in two rows on
    average), in their first order; [] when they are answers of another kind."""
    refs = [r.reference.strip() for r in data if r.reference.strip()]
    distinct = list(dict.fromkeys(refs))
    return distinct if 2 <= len(distinct) <= MAX_LABELS and len(refs) >= 2 * len(distinct) else []


def row_probes(data: Sequence[Row]) -> tuple[Probe, ...]:
    """The probes for these rows (the sample a check scores)."""
    refs = [r.reference.strip() for r in data if r.reference.strip()]
    distinct = list(dict.fromkeys(refs))

    def others(row: Row, rng: random.Random, n: int) -> list[str]:
        pool = [r for r in distinct if r != row.reference.strip()]
        return rng.sample(pool, min(n, len(pool))) if pool else ["something else"]

    def buried(row: Row, rng: random.Random) -> str:
        lines = [row.reference.strip(), *others(row, rng, 4)]
        rng.shuffle(lines)
        return "\n".join(lines)

    def padded(row: Row, rng: random.Random) -> str:
        filler = " ".join(" ".join(others(row, rng, 20)).split()[:FILLER_WORDS])
        return f"{row.reference.strip()}\n\n{filler}"

    probes = [
        Probe(
            "reference_among_distractors",
            "buries the answer among other rows' answers, one of which is right",
            "pay the answer the response commits to (its last, or only, answer), not any "
            "answer it mentions",
            buried,
        ),
        Probe(
            "every_reference",
            "lists every answer of the data at once",
            "refuse responses that give several answers; pay one committed answer",
            lambda row, rng: "\n".join(distinct[:MAX_LISTED]),
        ),
        Probe(
            "reference_then_retracted",
            "gives the answer, then takes it back for another ('19. No, 23.')",
            "pay the final answer, after any correction, not the first one",
            lambda row, rng: f"{row.reference.strip()}. No, {others(row, rng, 1)[0]}.",
        ),
        Probe(
            "hedge",
            "hedges between the answer and another ('either 19 or 23')",
            "refuse hedged answers: exactly one answer may be given",
            lambda row, rng: f"It is either {row.reference.strip()} or {others(row, rng, 1)[0]}.",
        ),
        Probe(
            "prompt_last_token",
            "answers with the prompt's own last number (or last word)",
            "compare with the reference, not with what the prompt contains",
            lambda row, rng: _last_token(row.prompt),
        ),
        Probe(
            "padded_with_other_answers",
            "gives the answer, then pads it with other rows' answers",
            "pay a concise answer; cap the length or refuse extra answers",
            padded,
        ),
        Probe(
            "truncated",
            "gives only the first half of the answer",
            "compare the whole answer, not a prefix",
            lambda row, rng: _half(row.reference.strip()),
        ),
        Probe(
            "answer_in_thinking",
            "puts the answer in a thinking block and answers nothing",
            "strip <think>...</think> before scoring",
            lambda row, rng: f"<think>\n{row.reference.strip()}\n</think>",
        ),
        Probe(
            "reference_alone",
            "the bare reference, nothing else",
            "none: a form the reward accepts",
            lambda row, rng: row.reference.strip(),
            kind="accepted",
        ),
        Probe(
            "reference_reformatted",
            "the reference in another form (case, spacing, 19.0, nineteen)",
            "none: a form the reward accepts (or refuses)",
            lambda row, rng: _reformatted(row.reference.strip(), rng),
            kind="accepted",
        ),
        Probe(
            "other_language",
            "the answer given in another language than the prompt",
            "decide whether the answer's language matters; check it if it does",
            lambda row, rng: f"La respuesta es: {row.reference.strip()}.",
            kind="info",
        ),
    ]
    if refs and all(NUMBER.fullmatch(r) for r in refs):
        top = max(abs(float(r)) for r in refs)
        sweep = " ".join(str(i) for i in range(min(SWEEP_CAP, max(SWEEP_TO, int(2 * top) + 1))))
        probes.append(
            Probe(
                "number_sweep",
                "counts through every number, so the answer is among them",
                "pay one committed number (e.g. the last), and refuse a list of numbers",
                lambda row, rng: sweep,
            )
        )
    if labels := label_set(data):
        probes.append(
            Probe(
                "every_label",
                f"names every label at once ({' / '.join(labels)})",
                "pay exactly one label; refuse responses naming several",
                lambda row, rng: " / ".join(labels),
            )
        )
    return tuple(probes)


def _last_token(prompt: str) -> str:
    numbers = NUMBER.findall(prompt)
    if numbers:
        return numbers[-1]
    words = re.findall(r"\w+", prompt)
    return words[-1] if words else prompt


def _half(text: str) -> str:
    words = text.split()
    if len(words) > 1:
        return " ".join(words[: len(words) // 2])
    return text[: max(1, len(text) // 2)] if len(text) > 1 else ""


def _reformatted(text: str, rng: random.Random) -> str:
    if NUMBER.fullmatch(text):
        value = float(text)
        if value.is_integer() and 0 <= value < len(WORDS) and rng.random() < 0.5:
            return WORDS[int(value)]
        return f"{value:.1f}" if value.is_integer() else f" {text} "
    if text.upper() != text:
        return f"  {text.upper()}  "
    return f"  {text.lower()}  "


def user_probe(spec: Mapping[str, Any]) -> Probe:
    """A probe the user wrote (`reward check --probes FILE`, one JSON object a line):
    {"name", "completion", "max_score"}; `{prompt}` and `{reference}` in the completion are
    replaced by each row's. Flagged when it scores above `max_score`."""
    template = str(spec["completion"])

    def build(row: Row, rng: random.Random) -> str:
        return template.replace("{prompt}", row.prompt).replace("{reference}", row.reference)

    return Probe(
        str(spec["name"]),
        f"your probe '{spec['name']}'",
        "the rule your probe names",
        build,
        kind="user",
        max_score=float(spec["max_score"]),
    )
