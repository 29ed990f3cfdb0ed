"""compare_scores: the statistics evaluate uses, on scores an agent brings from any harness
(lm-eval, inspect, whileai, its own): a file of rows, or the rows themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from posttrain.core.errors import ConfigError
from posttrain.core.paths import confine
from posttrain.evals.comparison import Comparison, compare_scores, read_scores

MAX_ROWS = 1_000_000


def compare(
    scores: str | list[dict[str, Any]],
    baseline: str | None = None,
    goal: Literal["maximize", "minimize"] = "maximize",
    roots: list[Path] | None = None,
) -> Comparison:
    """`scores`: a .jsonl or .csv file inside the allowed roots, or a list of rows
    {arm, replicate, task, score}, a row per sample."""
    if isinstance(scores, str):
        rows, lines = read_scores(confine(scores, "scores", roots))
        return compare_scores(rows, baseline, goal=goal, lines=lines)
    if len(scores) > MAX_ROWS:
        raise ConfigError(f"scores: {len(scores)} rows is over {MAX_ROWS}; give a file")
    return compare_scores(scores, baseline, goal=goal)
