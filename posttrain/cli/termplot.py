"""A small line chart for the terminal (block characters, no dependencies)."""

from __future__ import annotations

import math
from collections.abc import Sequence

LEVELS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 60) -> str:
    """One line of block characters, values bucketed to `width` columns (means)."""
    points = bucket(values, width)
    if not points:
        return ""
    lo, hi = min(points), max(points)
    span = hi - lo or 1.0
    return "".join(LEVELS[1 + round((v - lo) / span * (len(LEVELS) - 2))] for v in points)


def bucket(values: Sequence[float], width: int) -> list[float]:
    """Means of `width` consecutive slices (all the values when there are fewer)."""
    clean = [float(v) for v in values if v is not None and not math.isnan(v)]
    if len(clean) <= width:
        return clean
    size = len(clean) / width
    return [
        sum(chunk) / len(chunk)
        for i in range(width)
        if (chunk := clean[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)])
    ]


def chart(values: Sequence[float], width: int = 60, height: int = 8, label: str = "") -> str:
    """A multi-line chart: y axis with min/max, one column per bucket of steps."""
    points = bucket(values, width)
    if not points:
        return f"{label}: no data"
    lo, hi = min(points), max(points)
    span = hi - lo or 1.0
    cells = [[" "] * len(points) for _ in range(height)]
    for x, v in enumerate(points):
        level = (v - lo) / span * (height * 8 - 1)  # eighths of a row
        full, part = divmod(round(level), 8)
        for y in range(full):
            cells[height - 1 - y][x] = "█"
        if full < height:
            cells[height - 1 - full][x] = LEVELS[part + 1] if part else cells[height - 1 - full][x]
    lines = []
    for i, row in enumerate(cells):
        axis = f"{hi:7.3f} ┤" if i == 0 else (f"{lo:7.3f} ┤" if i == height - 1 else "        │")
        lines.append(axis + "".join(row))
    lines.append("        └" + "─" * len(points))
    n = len([v for v in values if v is not None])
    lines.append(f"         step 1{' ' * max(1, len(points) - 6 - len(str(n)))}{n}")
    return (label + "\n" if label else "") + "\n".join(lines)
