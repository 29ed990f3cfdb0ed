"""What every reward is: a picklable callable with TRL's signature that also reports components.

TRL calls `reward(completions=..., prompts=..., **dataset_columns)` and wants one float per
completion. posttrain calls `reward.score(...)` instead, which returns the same rewards plus
each component per completion, so traces can show *why* a response scored what it did.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import TypeAdapter, ValidationError

from posttrain.core.errors import ConfigError

R = TypeVar("R")


@dataclass
class Scores:
    """Rewards for a batch of completions, with the components that produced them."""

    rewards: list[float | None]  # None only from a judged reward: "cannot grade"
    components: dict[str, list[Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # batch-level facts, e.g. a fallback was used
    reasons: list[str | None] | None = None  # a judge's short reason for each score

    def row(self, i: int) -> dict[str, Any]:
        """The components of completion i, by name."""
        return {name: values[i] for name, values in self.components.items()}

    def __len__(self) -> int:
        return len(self.rewards)


class Reward(ABC):
    """Base of the built-in rewards. Subclasses are dataclasses (so they pickle) and set:

    name: the registry name; components: what `score` reports beside the reward;
    value_range: the closed interval every reward lies in (the guards enforce it);
    columns: the dataset columns `score` needs, as keyword arguments;
    judged: scores come from an outside judge: each costs a call, and one the judge could not
    grade is None (TRL leaves it out of training), which the guards allow of it alone.
    """

    name: ClassVar[str] = "reward"
    components: ClassVar[tuple[str, ...]] = ()
    headline: ClassVar[tuple[str, ...]] = ()  # components evaluate reports as metrics
    value_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    judged: ClassVar[bool] = False

    @property
    def columns(self) -> tuple[str, ...]:
        return ()

    @property
    def __name__(self) -> str:  # TRL names reward columns in its logs after __name__
        return self.name

    def ready(self) -> str | None:
        """Check what the reward needs from outside before a run spends anything (a judge's
        endpoint answers); raises a RewardError naming it, or says what answered."""
        return None

    def usage(self) -> dict[str, Any] | None:
        """What the reward's outside calls cost this process so far (a judge's requests,
        cache hits and answers it could not grade), or None for a reward that calls out."""
        return None

    @abstractmethod
    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        """Score a batch: one reward per completion, components alongside."""

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return self.score(completions, **kwargs).rewards


def graded_mean(values: Sequence[float | None]) -> float | None:
    """The mean of the scores a judge could grade (None where it graded none)."""
    graded = [v for v in values if v is not None]
    return sum(graded) / len(graded) if graded else None


def column(columns: dict[str, Any], name: str, n: int, reward: str) -> list[Any]:
    """A dataset column given to a reward, checked to exist with one value per completion."""
    values = columns.get(name)
    if values is None:
        given = sorted(k for k in columns if not k.startswith("_"))
        raise KeyError(
            f"reward '{reward}' needs the dataset column '{name}', which was not passed "
            f"(columns given: {given or 'none'}); add it to the dataset or set the reward's "
            f"column parameter to the column that holds it"
        )
    values = list(values)
    if len(values) != n:
        raise ValueError(
            f"reward '{reward}': column '{name}' has {len(values)} values for {n} completions"
        )
    return values


def build_reward(cls: type[R], params: Mapping[str, Any], reward: str) -> R:
    """A reward dataclass from user parameters, type-checked by pydantic; errors name the field."""
    try:
        return TypeAdapter(cls).validate_python(dict(params))
    except ValidationError as exc:
        problems = "; ".join(
            f"parameter '{'.'.join(map(str, e['loc']))}': {e['msg']} (got {e.get('input')!r})"
            for e in exc.errors()
        )
        raise ConfigError(f"reward '{reward}': {problems}") from None
