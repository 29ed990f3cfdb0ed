"""Turning a model's response into the verse lines a reward reads.

Completions reach rewards as plain strings or, from conversational datasets, as a list
of messages; `completion_text` accepts both. Everything here is pure and fast: it runs
on every sampled completion of every training step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# A whole thinking block, non-greedy so two blocks do not swallow the answer between them.
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# Chat specials (<|im_end|>) and leftover tags (<think>, </answer>, <br/>) carry no words.
_TAG = re.compile(r"<\|[^|>]*\|>|</?[A-Za-z][A-Za-z0-9_-]*\s*/?>")
# Markdown list markers, numbering, headings and quotes at the start of a line.
_LINE_MARKUP = re.compile(r"^\s*(?:[-*+\u2022>#]+|\(?\d{1,3}[.)\]:]|[A-Za-z][.)])\s+")
# A word is a run of letters, with inner apostrophes ("don't"); digits are not words.
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def completion_text(completion: Any) -> str:
    """The text of one completion, whether TRL passed a string or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        # Conversational completions: the assistant messages, joined.
        parts = [
            str(m.get("content") or "")
            for m in completion
            if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"
        ]
        return "\n".join(parts)
    return "" if completion is None else str(completion)


def strip_thinking(text: str, drop_tags: bool = True) -> str:
    """Remove thinking blocks (and, with drop_tags, stray tags): what the reader is shown.

    An unclosed `<think>` means the answer never came, so everything after it goes; a lone
    `</think>` means the block opened in the prompt, so everything before it goes.
    """
    if "<" not in text:
        return text
    text = _THINK_BLOCK.sub("\n", text)
    lower = text.lower()
    close = lower.rfind("</think>")
    if close != -1:
        text, lower = text[close + len("</think>") :], lower[close + len("</think>") :]
    opened = lower.find("<think>")
    if opened != -1:
        text = text[:opened]
    return _TAG.sub(" ", text) if drop_tags else text


def verse_lines(text: str) -> list[str]:
    """Non-empty lines with markdown markers removed; lines without a single word are dropped.

    Dropping word-less lines ("---", "***", emoji rows) keeps decoration from counting as verse.
    """
    lines = []
    for raw in strip_thinking(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if line[0] in "-*+\u2022>#(" or line[0].isdigit() or (len(line) > 1 and line[1] in ".)"):
            line = _LINE_MARKUP.sub("", line, count=1)
        if WORD.search(line):
            lines.append(line)
    return lines


def end_word(line: str) -> str | None:
    """The last word of a line, or None when the line ends in a number or symbol.

    A line ending in "42." has no end word: a rhyme is heard on the last word spoken, and a
    numeral gives no pronunciation to match.
    """
    tokens = line.split()
    if not tokens:
        return None
    words = WORD.findall(tokens[-1])
    return words[-1].lower() if words else None


def plain_text(text: str) -> str:
    """The visible answer as one string: thinking removed, whitespace folded."""
    return " ".join(strip_thinking(text).split())
