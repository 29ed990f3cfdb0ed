"""How well a judge agrees with labels a person (or a rule) gave: a rank correlation with an
interval, on a file of {"prompt", "completion", "label"} lines.

Spearman's rho, because GRPO uses only the ranking of a prompt's completions; the interval is
a paired bootstrap over the labelled answers (scipy). Answers the judge could not grade are
counted and left out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.jsonl import jsonl_objects
from posttrain.core.paths import expand
from posttrain.rewards.base import Reward
from posttrain.rewards.guards import checked_scores

MAX_LABELS = 2000
MIN_LABELS = 5


@dataclass
class Agreement:
    n: int
    spearman: float | None
    interval: tuple[float, float] | None  # 95%, paired bootstrap
    ungraded: int
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_labels(path: str) -> list[dict[str, Any]]:
    file = expand(path)
    rows = []
    lines = jsonl_objects(
        path,
        "labels file",
        ("prompt", "completion", "label"),
        '{"prompt": "...", "completion": "...", "label": <the score it deserves>}',
    )
    for n, item in lines:
        label = item["label"]
        if (
            isinstance(label, bool)
            or not isinstance(label, int | float)
            or not math.isfinite(label)
        ):
            raise ConfigError(f"labels file {file} line {n}: label must be a number, not {label!r}")
        rows.append(item)
    if not MIN_LABELS <= len(rows) <= MAX_LABELS:
        raise ConfigError(
            f"labels file {file}: give {MIN_LABELS} to {MAX_LABELS} labelled answers "
            f"(got {len(rows)})"
        )
    return rows


def agreement(reward: Reward, rows: list[dict[str, Any]], seed: int = 0) -> Agreement:
    """The reward's scores of the labelled answers against their labels. Rows of one prompt
    side by side are judged as one group, as in training."""
    import numpy as np
    from scipy import stats

    columns = {k: [r.get(k) for r in rows] for k in dict.fromkeys(k for r in rows for k in r)}
    columns.pop("completion", None)
    columns.pop("label", None)
    prompts = [str(p) for p in columns.pop("prompt")]
    scores = checked_scores(
        reward, [str(r["completion"]) for r in rows], prompts=prompts, **columns
    )
    pairs = [
        (float(r["label"]), s) for r, s in zip(rows, scores.rewards, strict=True) if s is not None
    ]
    ungraded = len(rows) - len(pairs)
    labels, judged = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    if len(pairs) < MIN_LABELS or np.ptp(labels) == 0 or np.ptp(judged) == 0:
        why = (
            "too few graded answers"
            if len(pairs) < MIN_LABELS
            else "the labels are all equal"
            if np.ptp(labels) == 0
            else f"the judge gave every answer the same score ({judged[0]:g})"
        )
        return Agreement(len(pairs), None, None, ungraded, f"no rank correlation: {why}")
    rho = float(stats.spearmanr(labels, judged).statistic)
    found = stats.bootstrap(
        (labels, judged),
        lambda a, b: stats.spearmanr(a, b).statistic,
        paired=True,
        vectorized=False,
        n_resamples=999,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = (float(x) for x in found.confidence_interval)
    interval = (round(low, 3), round(high, 3)) if math.isfinite(low + high) else None
    if interval and interval[0] > 0.5:
        verdict = f"agrees with the labels: rho {rho:.2f}"
    elif interval and interval[0] > 0:
        verdict = f"agrees weakly with the labels: rho {rho:.2f}; check the rubric or judge"
    else:
        verdict = f"no agreement shown with the labels (rho {rho:.2f}): do not train on this judge"
    return Agreement(len(pairs), round(rho, 3), interval, ungraded, verdict)
