"""One page of traces, lean: what every sample repeats (the system prompt and tool schemas at
the head of each rendered prompt, or of an SFT row's training text) is said once per page,
and a page holds at most PAGE_CHARS of text, so a default sample_traces result stays well
under what a client accepts (Claude Code: 25k tokens) however long the run."""

from __future__ import annotations

import json
from typing import Any

PAGE_CHARS = 24_000  # the text of one page's samples, shared heads included
SHARED_FIELDS = ("rendered", "trained")  # fields whose common head is sent once a page
MIN_SHARED_CHARS = 200  # a shorter common head is not worth a field of its own
TEXT_FIELDS = ("prompt", "completion", "reference", "rendered", "trained")


def shared_head(texts: list[str]) -> str:
    """The head every text starts with, cut back to a line's end; "" when short or alone."""
    if len(texts) < 2:
        return ""
    first, last = min(texts), max(texts)  # the common head of all is that of these two
    n = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    head = first[:n]
    head = head[: head.rfind("\n") + 1]
    return head if len(head) >= MIN_SHARED_CHARS else ""


def size(row: dict[str, Any]) -> int:
    episode = row.get("episode")
    return sum(len(row.get(f) or "") for f in TEXT_FIELDS) + (
        len(json.dumps(episode, default=str)) if episode else 0
    )


def lean(
    by_step: dict[int, list[dict[str, Any]]], budget: int = PAGE_CHARS
) -> tuple[dict[int, list[dict[str, Any]]], dict[str, str], list[int]]:
    """The rows of as many whole steps as fit the budget (the first step's first rows always,
    cut to fit), each shared head taken out of its rows; and the steps left for a next page.
    Returns (rows by step, shared heads by field, steps left)."""
    every = [r for rows in by_step.values() for r in rows]
    shared = {}
    for name in SHARED_FIELDS:
        values = [r[name] for r in every if r.get(name)]
        if len(values) == len(every) and (head := shared_head(values)):
            shared[name] = head
    stripped = {
        step: [{**r, **{f: r[f][len(h) :] for f, h in shared.items()}} for r in rows]
        for step, rows in by_step.items()
    }
    used = sum(len(h) for h in shared.values())
    out: dict[int, list[dict[str, Any]]] = {}
    steps = list(stripped)
    for i, step in enumerate(steps):
        rows = stripped[step]
        cost = sum(size(r) for r in rows)
        if out and used + cost > budget:
            return out, shared, steps[i:]
        if not out and used + cost > budget:  # the first step alone is too big: its first rows
            kept = []
            for r in rows:
                if kept and used + size(r) > budget:
                    break
                kept.append(r)
                used += size(r)
            out[step] = kept
            return out, shared, steps[i + 1 :]
        out[step] = rows
        used += cost
    return out, shared, []
