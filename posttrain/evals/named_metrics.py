"""eval.metrics: rewards the user names, scored as metrics on every pass of an evaluation.

Each is built as `reward:` is (posttrain.rewards.registry): a built-in scores here, the user's
own code only in the isolated child (posttrain.rewards.isolated), never in the server. Their
values join each pass's metrics under the name each is reported by, and go through the same
comparison as every other metric. They are un-optimised (the training did not pay them), so
one worse beyond noise qualifies the verdict; for a kind whose own headline cannot be measured
(no reward, no references), the first of them is the headline (posttrain.evals.evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.guards import score_rows
from posttrain.rewards.isolated import inspect_reward, score_in_subprocess
from posttrain.rewards.registry import get_reward
from posttrain.rewards.user import UserReward

FIELD = "eval.metrics"


@dataclass(frozen=True)
class Named:
    """One metric of eval.metrics, built."""

    label: str  # what it is reported as
    ref: str  # the reward's registry name or file reference
    params: dict[str, Any]
    reward: Reward
    field: str  # where the spec names it: eval.metrics[i]


def named_metrics(spec: Any) -> list[Named]:
    """The spec's eval.metrics, built (none when it names none)."""
    if spec.eval is None:
        return []
    return [
        Named(m.reported, m.name, dict(m.params), get_reward(m.name, m.params), f"{FIELD}[{i}]")
        for i, m in enumerate(spec.eval.metrics)
    ]


def check_columns(named: list[Named], tasks: list[dict[str, Any]], where: str) -> None:
    """Every column each metric reads is in the held-out rows (`where` names them), else a
    ConfigError naming the metric, the column and the fix; before any model is loaded."""
    have = sorted({k for t in tasks for k in t})
    for metric in named:
        if isinstance(metric.reward, UserReward):  # their code: its signature read in a child
            columns = inspect_reward(metric.ref, metric.params)["columns"]
        else:
            columns = list(metric.reward.columns)
        missing = [c for c in columns if c not in have]
        if missing:
            raise ConfigError(
                f"{metric.field} ({metric.ref}) reads column(s) {missing}, which {where} lack "
                f"(they have: {have}); point the metric at a column they have (its params, "
                f"e.g. {{name: tool_call, params: {{label_column: expected}}}}) or add the "
                f"column to the rows"
            )


def score(
    reward: Reward,
    ref: str,
    params: dict[str, Any],
    passes: list[list[Any]],
    rows: list[dict[str, Any]],
) -> list[Scores]:
    """The reward's scores of each pass (a flat list of completions, one row each): here for
    a built-in reward, in an isolated child for the user's own code."""
    if not isinstance(reward, UserReward):
        return [score_rows(reward, completions, rows) for completions in passes]
    answers = score_in_subprocess(ref, params, [(p, rows) for p in passes])
    return [Scores(rewards=a["rewards"], components=a["components"]) for a in answers]


def named_values(
    named: list[Named], passes: list[list[Any]], rows: list[dict[str, Any]], n_tasks: int, k: int
) -> list[dict[str, list[list[float | None]]]]:
    """Per pass: metric -> [task][sample] values of every named metric."""
    every: list[dict[str, list[list[float | None]]]] = [{} for _ in passes]
    for metric in named:
        for values, scores in zip(
            every, score(metric.reward, metric.ref, metric.params, passes, rows), strict=True
        ):
            flat = scores.rewards
            values[metric.label] = [flat[i * k : (i + 1) * k] for i in range(n_tasks)]
    return every
