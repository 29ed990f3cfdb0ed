"""The reward of an episode: the environment's get_reward() and the spec's reward, summed as
components (weight 1 each, as TRL sums its reward sources), with the episode's facts beside
them (tool calls, tool errors, assistant turns) so traces and metrics show how it went.

TRL passes each rollout's environment instance as `environments`; evaluate's episode player
passes its own the same way. A completion is the episode after the prompt: the assistant
turns and tool messages, as TRL keeps them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from posttrain.core.errors import RewardError
from posttrain.environments.transcript import transcript
from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.guards import checked_scores, reward_label
from posttrain.rewards.user import UserReward

ENVIRONMENT = "environment"  # the component holding get_reward()'s value
FACTS = ("tool_calls", "tool_errors", "turns")  # reported, never added to the reward


@dataclass
class EpisodeReward(Reward):
    """get_reward() of each episode's environment plus `inner` (the spec's reward, or None)."""

    inner: Reward | None = None
    name: ClassVar[str] = "episode"
    value_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.inner.columns if self.inner is not None else ()

    def __post_init__(self) -> None:
        if isinstance(self.inner, UserReward):  # it reads episodes: each as its messages
            self.inner = dataclasses.replace(self.inner, episodes=True)

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        environments = columns.pop("environments", None) or [None] * len(completions)
        n = len(completions)
        totals = [0.0] * n
        components: dict[str, list[float]] = {}
        sources = 0
        if any(env is not None and env._has_reward() for env in environments):
            values = [self._env_reward(env, i) for i, env in enumerate(environments)]
            components[ENVIRONMENT] = values
            totals = [t + v for t, v in zip(totals, values, strict=True)]
            sources += 1
        if self.inner is not None:
            inner = checked_scores(self.inner, completions, **columns)
            label = reward_label(self.inner)
            components[label] = inner.rewards
            components.update({f"{label}:{k}": v for k, v in inner.components.items()})
            totals = [t + v for t, v in zip(totals, inner.rewards, strict=True)]
            sources += 1
        if not sources:
            raise RewardError(
                "nothing scores these episodes: the environment defines no get_reward() and the "
                "spec names no reward; add get_reward() to the environment or a reward to the spec"
            )
        read = [transcript(c) for c in completions]
        components["tool_calls"] = [float(t["tool_calls"]) for t in read]
        components["tool_errors"] = [float(t["tool_errors"]) for t in read]
        components["turns"] = [float(t["turn_count"]) for t in read]
        return Scores(rewards=totals, components=components)

    def _env_reward(self, env: Any, i: int) -> float:
        if env is None or not env._has_reward():
            return 0.0
        value, problem = env._episode_reward()
        if problem or value is None or not math.isfinite(value):
            raise RewardError(
                f"environment {env._loaded.described}: episode {i}: "
                f"{problem or f'get_reward() returned {value}'}; fix get_reward (run "
                f"`posttrain env check` on the spec)"
            )
        return value
