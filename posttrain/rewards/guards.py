"""Guards around every reward call: a broken reward stops with a clear error, never a bad number.

A reward that raises, returns None/NaN/inf, the wrong number of values, or a value outside its
declared range would otherwise train the model on garbage (or, if swallowed as 0, turn an
infrastructure bug into "the model is bad"). `checked_scores` names the reward and the
offending example instead.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.core.errors import RewardError
from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.text import completion_text

EXCERPT_CHARS = 80


def excerpt(completion: Any, limit: int = EXCERPT_CHARS) -> str:
    text = completion_text(completion)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def reward_label(reward: Reward) -> str:
    return getattr(reward, "ref", None) or reward.name


def _slice_columns(columns: dict[str, Any], i: int, n: int) -> dict[str, Any]:
    """Column values of example i alone (columns that are not per-example pass unchanged)."""
    out = {}
    for key, values in columns.items():
        is_batch = isinstance(values, Sequence) and not isinstance(values, str)
        out[key] = [values[i]] if is_batch and len(values) == n else values
    return out


def _find_raising_example(
    reward: Reward, completions: Sequence[Any], columns: dict[str, Any]
) -> tuple[int, BaseException] | None:
    """Re-score one example at a time to find the first that raises on its own."""
    n = len(completions)
    for i in range(n):
        try:
            reward.score([completions[i]], **_slice_columns(columns, i, n))
        except Exception as exc:
            return i, exc
    return None


def checked_scores(reward: Reward, completions: Sequence[Any], **columns: Any) -> Scores:
    """reward.score(...), with every failure turned into a RewardError naming the example."""
    label = reward_label(reward)
    n = len(completions)
    try:
        scores = reward.score(completions, **columns)
    except RewardError:
        raise
    except Exception as exc:
        found = _find_raising_example(reward, completions, columns)
        if found is not None:
            i, first = found
            raise RewardError(
                f"reward '{label}' raised {type(first).__name__}: {first} -- on example {i} "
                f"(completion {excerpt(completions[i])}); fix the reward or the data row"
            ) from exc
        raise RewardError(
            f"reward '{label}' raised {type(exc).__name__}: {exc} -- on the batch of {n} "
            f"(each example alone scores fine)"
        ) from exc

    values = scores.rewards
    if len(values) != n:
        raise RewardError(
            f"reward '{label}' returned {len(values)} values for {n} completions; it must "
            f"return exactly one value per completion"
        )
    low, high = reward.value_range
    for i, value in enumerate(values):
        problem = None
        if value is None and reward.judged:
            continue  # the judge could not grade it: TRL trains nothing on it
        if value is None:
            problem = "None (cannot grade)"
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            problem = f"a {type(value).__name__} ({value!r}), not a number"
        elif math.isnan(value) or math.isinf(value):
            problem = str(value)
        elif not low <= value <= high:
            problem = f"{value}, outside its declared range [{low}, {high}]"
        if problem:
            raise RewardError(
                f"reward '{label}' returned {problem} for example {i} (completion "
                f"{excerpt(completions[i])}); return a finite float for every completion"
            )
    scores.rewards = [None if v is None else float(v) for v in values]
    return scores


def score_rows(
    reward: Reward, completions: Sequence[Any], rows: Sequence[dict[str, Any]]
) -> Scores:
    """checked_scores for completions of shaped dataset rows (one row per completion): the
    prompts, and every column of the rows by name, as TRL would pass them."""
    names = dict.fromkeys(k for r in rows for k in r if k not in ("prompt", "completion"))
    columns = {key: [r.get(key) for r in rows] for key in names}
    return checked_scores(reward, completions, prompts=[r["prompt"] for r in rows], **columns)


@dataclass(frozen=True)
class Guarded:
    """A reward as TRL calls it, with the guards applied. Picklable when the reward is."""

    reward: Reward

    @property
    def __name__(self) -> str:
        return self.reward.__name__

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return checked_scores(self.reward, completions, **kwargs).rewards
