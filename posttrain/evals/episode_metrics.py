"""evaluate's measures of a run trained in an environment, from the held-out episodes its
generator played (posttrain.gpu.episodes: each scored there, where user code may run).

Per episode: the reward (get_reward plus the spec's reward), success (the reward reaches
the threshold: by default 1.0, what a get_reward pays a solved episode by convention; pass
`threshold` otherwise), and, not optimised, tool errors (fewer is better), tool calls and
assistant turns (described, never judged). pass@k and pass^k come from success.
"""

from __future__ import annotations

from typing import Any

from posttrain.environments.transcript import episode_line

DEFAULT_THRESHOLD = 1.0
OPTIMISED = ("reward", "success")
LOWER_IS_BETTER = ("tool_errors",)
DESCRIBED = ("turns", "tool_calls")  # directionless: reported, never judged


def episode_metrics(
    one_pass: list[list[dict[str, Any]]], threshold: float
) -> dict[str, list[list[float]]]:
    """metric -> [task][sample] values of one pass of episodes."""

    def each(value: Any) -> list[list[float]]:
        return [[float(value(e)) for e in task] for task in one_pass]

    return {
        "reward": each(lambda e: e["reward"]),
        "success": each(lambda e: e["reward"] >= threshold),
        "tool_errors": each(lambda e: e["episode"]["tool_errors"]),
        "turns": each(lambda e: e["episode"]["turn_count"]),
        "tool_calls": each(lambda e: e["episode"]["tool_calls"]),
    }


def example_text(record: dict[str, Any]) -> str:
    return episode_line(record["episode"])
