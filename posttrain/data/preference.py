"""What makes a preference file teach nothing, or teach the wrong thing: the flags `data check`
raises on DPO rows, each with its count, an example and what to do.

DPO learns the difference between the chosen and the rejected answer. It learns nothing from
a pair whose answers are the same (or differ only in whitespace, or only past the truncation
length); it is pulled both ways by a prompt whose pairs contradict each other; and it learns
whatever else separates the answers as faithfully as what the raters meant: when the chosen
answer is the longer one in most pairs, longer answers are what it learns.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from posttrain.data.toolcalls import as_text

NEAR_IDENTICAL = 0.97  # difflib ratio of two answers above which they differ by a few chars
LENGTH_BIAS_SHARE = 0.7  # one side longer in this share of the pairs is a bias DPO learns
LENGTH_BIAS_GAP = 0.1  # ...and longer on average by this share of the answers' length
MIN_PAIRS_FOR_BIAS = 8
EXAMPLE_CHARS = 80


def answer_text(messages: Sequence[dict[str, Any]]) -> str:
    """An answer (its assistant turns) as one string: contents, then any tool calls."""
    parts = []
    for m in messages:
        parts.append(as_text(m.get("content")) or "")
        if m.get("tool_calls"):
            parts.append(json.dumps(m["tool_calls"], sort_keys=True, default=str))
    return "\n".join(p for p in parts if p)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _prompt_key(row: dict[str, Any]) -> str:
    return json.dumps(row["prompt"], sort_keys=True, default=str)


def _example(row: dict[str, Any]) -> str:
    return f"row {row['id']!r} ({_squash(row.get('prompt_text') or '')[:EXAMPLE_CHARS]!r})"


def _flag(what: str, rows: list[dict[str, Any]], total: int, fix: str) -> str:
    return f"{len(rows)} of {total} pairs {what} (e.g. {_example(rows[0])}); {fix}"


def pair_flags(
    rows: list[dict[str, Any]],
    lengths: Sequence[tuple[int, int]] | None = None,
    cut: Sequence[dict[str, Any]] = (),
    max_length: int | None = None,
) -> list[str]:
    """The flags of preference rows (shaped by posttrain.data.dataset: prompt, chosen and
    rejected as messages). `lengths` are each row's (chosen, rejected) token counts where
    known, else characters are compared; `cut` are the rows whose answers differ only past
    `max_length` tokens."""
    total = len(rows)
    if not total:
        return []
    texts = [(answer_text(r["chosen"]), answer_text(r["rejected"])) for r in rows]
    identical, spacing, near, empty = [], [], [], []
    for row, (chosen, rejected) in zip(rows, texts, strict=True):
        if not chosen.strip() or not rejected.strip():
            empty.append(row)
        elif chosen == rejected:
            identical.append(row)
        elif _squash(chosen) == _squash(rejected):
            spacing.append(row)
        elif difflib.SequenceMatcher(None, chosen, rejected).ratio() >= NEAR_IDENTICAL:
            near.append(row)
    flags = []
    same = "DPO learns nothing from them and they dilute the batch"
    if identical:
        flags.append(_flag("have identical chosen and rejected answers", identical, total, same))
    if spacing:
        flags.append(
            _flag("differ only in whitespace", spacing, total, f"{same}, or teach spacing")
        )
    if near:
        flags.append(
            _flag(
                f"are near-identical (over {NEAR_IDENTICAL:.0%} of characters alike)",
                near,
                total,
                "check that the small difference is the preference you mean",
            )
        )
    if empty:
        flags.append(
            _flag(
                "have an empty chosen or rejected answer",
                empty,
                total,
                "fill them or drop them with dataset.filters",
            )
        )
    if cut:
        flags.append(
            _flag(
                f"differ only past the truncation length ({max_length} tokens: "
                f"max_prompt_length + max_completion_length)",
                list(cut),
                total,
                "raise algorithm.max_completion_length (or max_prompt_length), or shorten "
                "the prompts: truncated, both answers read the same",
            )
        )
    flags += _contradictions(rows, texts)
    flags += _length_bias(texts, lengths)
    return flags


def _contradictions(rows: list[dict[str, Any]], texts: list[tuple[str, str]]) -> list[str]:
    """Prompts that appear more than once with one answer chosen in one pair and rejected in
    another (A over B, then B over A)."""
    by_prompt: dict[str, list[tuple[str, str, dict[str, Any]]]] = defaultdict(list)
    for row, (chosen, rejected) in zip(rows, texts, strict=True):
        by_prompt[_prompt_key(row)].append((_squash(chosen), _squash(rejected), row))
    clashing = []
    for pairs in by_prompt.values():
        if len(pairs) < 2:
            continue
        preferred = {c for c, _, _ in pairs}
        if any(r in preferred for _, r, _ in pairs):
            clashing.append(pairs[0][2])
    if not clashing:
        return []
    return [
        f"{len(clashing)} {'prompt appears' if len(clashing) == 1 else 'prompts appear'} in "
        f"several pairs with contradicting preferences (an "
        f"answer chosen in one pair is rejected in another, e.g. {_example(clashing[0])}); DPO "
        f"is pulled both ways: keep one judgement per pair of answers"
    ]


def _length_bias(
    texts: list[tuple[str, str]], lengths: Sequence[tuple[int, int]] | None
) -> list[str]:
    unit = "tokens" if lengths is not None else "characters"
    sizes = list(lengths) if lengths is not None else [(len(c), len(r)) for c, r in texts]
    differing = [(c, r) for c, r in sizes if c != r]
    if len(differing) < MIN_PAIRS_FOR_BIAS:
        return []
    longer = sum(c > r for c, r in differing) / len(differing)
    mean_c = sum(c for c, _ in sizes) / len(sizes)
    mean_r = sum(r for _, r in sizes) / len(sizes)
    said = f"(mean {mean_c:.0f} {unit} chosen, {mean_r:.0f} rejected)"
    if abs(mean_c - mean_r) < LENGTH_BIAS_GAP * max(mean_c, mean_r):
        return []  # one side longer by a token or two: not what the pairs teach
    if longer >= LENGTH_BIAS_SHARE:
        return [
            f"length bias: the chosen answer is the longer one in {longer:.0%} of the pairs "
            f"{said}; DPO will learn to answer longer as faithfully as what the raters meant. "
            f"Balance the lengths, or watch completion length in evaluate"
        ]
    if longer <= 1 - LENGTH_BIAS_SHARE:
        return [
            f"length bias: the chosen answer is the shorter one in {1 - longer:.0%} of the "
            f"pairs {said}; DPO will learn to answer shorter as faithfully as what the raters "
            f"meant. Balance the lengths, or watch completion length in evaluate"
        ]
    return []
