"""The canonical task reward: answer in rhyme, and still answer the question.

gate = min(1, relevance / 0.4); reward = gate x rhyme + 0.3 x relevance, in [0, 1.3].

The gate stops off-topic verse and rhyming gibberish from collecting the rhyme reward: below
relevance 0.4 the rhyme is paid only in proportion. The small relevance term keeps a gradient
toward the right answer even while nothing rhymes yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, ClassVar

from pydantic import Field

from posttrain.core.errors import ConfigError
from posttrain.rewards.base import Reward, Scores, build_reward
from posttrain.rewards.relevance import RelevanceReward
from posttrain.rewards.rhyme import RhymeReward


@dataclass(frozen=True)
class RhymeRelevanceReward(Reward):
    """Rhyme, gated by relevance to the reference answer, plus a little relevance."""

    name: ClassVar[str] = "rhyme_relevance"
    components: ClassVar[tuple[str, ...]] = (
        "rhyme",
        "relevance",
        "gate",
        *RhymeReward.components,
        "fallback",
    )
    headline: ClassVar[tuple[str, ...]] = ("rhyme", "relevance")
    rhyme: RhymeReward = field(default_factory=RhymeReward)
    relevance: RelevanceReward = field(default_factory=RelevanceReward)
    gate_at: Annotated[float, Field(gt=0, le=1)] = 0.4  # relevance that pays the rhyme in full
    relevance_weight: Annotated[float, Field(ge=0, le=10)] = 0.3

    @classmethod
    def from_params(cls, **params: Any) -> RhymeRelevanceReward:
        """Flat parameters, each routed to its owner (reference_column -> relevance)."""
        own = {f.name for f in fields(cls)} - {"rhyme", "relevance"}
        rhyme_keys = {f.name for f in fields(RhymeReward)}
        relevance_keys = {f.name for f in fields(RelevanceReward)}
        unknown = set(params) - own - rhyme_keys - relevance_keys
        if unknown:
            allowed = sorted(own | rhyme_keys | relevance_keys)
            raise ConfigError(
                f"reward 'rhyme_relevance' has no parameter {sorted(unknown)}; allowed: {allowed}"
            )
        return build_reward(
            cls,
            {
                "rhyme": {k: v for k, v in params.items() if k in rhyme_keys},
                "relevance": {k: v for k, v in params.items() if k in relevance_keys},
                **{k: v for k, v in params.items() if k in own},
            },
            cls.name,
        )

    @property
    def value_range(self) -> tuple[float, float]:  # type: ignore[override]
        return (0.0, 1.0 + self.relevance_weight)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.relevance.columns

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        rhyme = self.rhyme.score(completions, **columns)
        relevance = self.relevance.score(completions, **columns)
        gates = [min(1.0, r / self.gate_at) for r in relevance.rewards]
        rewards = [
            g * rh + self.relevance_weight * rel
            for g, rh, rel in zip(gates, rhyme.rewards, relevance.rewards, strict=True)
        ]
        return Scores(
            rewards=rewards,
            components={
                "rhyme": rhyme.rewards,
                "relevance": relevance.rewards,
                "gate": gates,
                **rhyme.components,
                "fallback": relevance.components["fallback"],
            },
            notes=rhyme.notes + relevance.notes,
        )
