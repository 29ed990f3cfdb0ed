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
