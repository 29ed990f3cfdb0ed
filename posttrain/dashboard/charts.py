"""Charts without a charting library: inline SVG for the dashboard, PNG (Pillow) for agents.

A chart is a few series of (step, value) points over a shared step axis. The first series
is drawn with a marker per point, so a reader (or a test) can count the steps.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from html import escape

Series = dict[str, list[tuple[int, float]]]
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


def _clean(series: Series) -> Series:
    return {
        name: [(s, v) for s, v in points if v is not None and math.isfinite(v)]
        for name, points in series.items()
    }


def _bounds(series: Series) -> tuple[int, int, float, float]:
    steps = [s for points in series.values() for s, _ in points]
    values = [v for points in series.values() for _, v in points]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    return min(steps), max(steps), lo, hi


def svg_chart(
    series: Series,
    title: str,
    width: int = 640,
    height: int = 220,
    chart_id: str = "",
    bands: dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]] | None = None,
) -> str:
    """An SVG line chart; the first series gets one <circle class="pt"> per point. `bands`:
    a series' spread (its lows and highs by step, e.g. across seeds), shaded behind it."""
    series = _clean(series)
    if not any(series.values()):
        return f'<p class="empty">{escape(title)}: no data yet</p>'
    bands = {name: (lows, highs) for name, (lows, highs) in (bands or {}).items() if lows}
    x0, x1, lo, hi = _bounds(
        {**series, **{f"{n} {i}": b[i] for n, b in bands.items() for i in (0, 1)}}
    )
    left, right, top, bottom = 52, 12, 24, 28
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(step: int) -> float:
        return left + (step - x0) / max(1, x1 - x0) * plot_w

    def y(value: float) -> float:
        return top + (hi - value) / (hi - lo) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" class="title">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>',
        f'<text x="{left - 6}" y="{top + 4}" class="tick" text-anchor="end">{hi:.3g}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" class="tick" text-anchor="end">{lo:.3g}</text>',
        f'<text x="{left}" y="{height - 8}" class="tick">step {x0}</text>',
        f'<text x="{left + plot_w}" y="{height - 8}" class="tick" text-anchor="end">{x1}</text>',
    ]
    legend_x = left + 7 * len(title) + 16  # after the title
    for i, (name, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        if not points:
            continue
        if name in bands:  # lows left to right, then highs back: one closed shape
            lows, highs = bands[name]
            outline = [*lows, *reversed(highs)]
            shape = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in outline)
            parts.append(
                f'<polygon points="{shape}" fill="{colour}" fill-opacity="0.15" stroke="none" '
                f'class="band" data-name="{escape(name)}"/>'
            )
        coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in points)
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" '
            f'stroke-width="1.5" class="series" data-name="{escape(name)}"/>'
        )
        if i == 0:
            parts += [
                f'<circle class="pt" cx="{x(s):.1f}" cy="{y(v):.1f}" r="1.6" '
                f'fill="{colour}"><title>step {s}: {v:.4f}</title></circle>'
                for s, v in points
            ]
        parts.append(
            f'<text x="{legend_x}" y="16" class="legend" fill="{colour}">{escape(name)}</text>'
        )
        legend_x += 8 * len(name) + 24
    parts.append("</svg>")
    return "".join(parts)


def png_chart(series: Series, title: str, width: int = 720, height: int = 300) -> bytes:
    """The same chart as a PNG, for MCP clients that render images."""
    from PIL import Image, ImageDraw

    series = _clean(series)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((10, 6), title, fill="black")
    if not any(series.values()):
        draw.text((10, 40), "no data yet", fill="gray")
    else:
        x0, x1, lo, hi = _bounds(series)
        left, right, top, bottom = 60, 16, 28, 30
        plot_w, plot_h = width - left - right, height - top - bottom
        draw.line([(left, top), (left, top + plot_h), (left + plot_w, top + plot_h)], fill="gray")
        draw.text((4, top), f"{hi:.3g}", fill="black")
        draw.text((4, top + plot_h - 10), f"{lo:.3g}", fill="black")
        draw.text((left, height - 18), f"step {x0}", fill="black")
        draw.text((left + plot_w - 40, height - 18), f"{x1}", fill="black")
        legend_x = 10 + 7 * len(title) + 16
        for i, (name, points) in enumerate(series.items()):
            colour = COLOURS[i % len(COLOURS)]
            coords = [
                (left + (s - x0) / max(1, x1 - x0) * plot_w, top + (hi - v) / (hi - lo) * plot_h)
                for s, v in points
            ]
            if len(coords) > 1:
                draw.line(coords, fill=colour, width=2)
            draw.text((legend_x, 6), name, fill=colour)
            legend_x += 7 * len(name) + 20
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def metric_series(metrics: Sequence[dict], *names: str) -> Series:
    """Series of top-level metric names or 'components.x' paths from per-step metrics."""
    out: Series = {}
    for name in names:
        label = name.removeprefix("components.")
        points = []
        for m in metrics:
            value = (
                (m.get("components") or {}).get(label)
                if name.startswith("components.")
                else m.get(name)
            )
            if isinstance(value, int | float):
                points.append((int(m["step"]), float(value)))
        out[label] = points
    return out
