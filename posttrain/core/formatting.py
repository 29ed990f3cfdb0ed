"""How numbers and times read to a person (the CLI and the dashboard share these)."""

from __future__ import annotations

import time


def ago(seconds: float | None) -> str:
    """90 -> '2m', 7200 -> '2h'; None -> '-'."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def num(value: float | None, digits: int = 3) -> str:
    """A number to `digits` places; "-" for none (or a field an older record lacks)."""
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


def cut(text: str, limit: int, tail: int = 0) -> str:
    """`text` in at most about `limit` characters, every cut marked with what it left out
    ("... [212 more characters]"); `tail` characters of the end are kept, so a closing token
    (`<|im_end|>`, a last line) is never dropped silently."""
    if len(text) <= limit:
        return text
    tail = min(tail, limit // 2)
    head = text[: limit - tail]
    left_out = len(text) - len(head) - tail
    mark = f"... [{left_out:,} more characters]"
    if not tail:
        return head + mark
    return f"{head}{mark}{text[-tail:]}" if "\n" not in text else f"{head}\n{mark}\n{text[-tail:]}"
