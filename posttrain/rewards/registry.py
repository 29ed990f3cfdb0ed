"""Reward names -> rewards, each declaring its components, value range and the columns it needs.

`get_reward("rhyme_relevance", {"reference_column": "answer"})` builds a registered reward;
`get_reward("rewards/mine.py:score")` or `get_reward("pkg.mod:fn")` loads a user reward.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.paths import confine
from posttrain.rewards.base import Reward, build_reward
from posttrain.rewards.judge.reward import JudgeReward
from posttrain.rewards.relevance import RelevanceReward
from posttrain.rewards.rhyme import RhymeReward
from posttrain.rewards.rhyme_relevance import RhymeRelevanceReward
from posttrain.rewards.tool_call import ToolCallReward
from posttrain.rewards.user import UserReward, is_file_ref, split_ref


@dataclass(frozen=True)
class RewardInfo:
    name: str
    description: str
    build: Callable[..., Reward]
    parameters: tuple[str, ...]
    example: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # needs params

    @property
    def default(self) -> Reward:
        return self.build(**self.example)

    @property
    def components(self) -> tuple[str, ...]:
        return self.default.components

    @property
    def value_range(self) -> tuple[float, float]:
        return self.default.value_range

    @property
    def columns(self) -> tuple[str, ...]:
        return self.default.columns

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "components": list(self.components),
            "value_range": list(self.value_range),
            "columns": list(self.columns),
            "parameters": list(self.parameters),
        }


def _params(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _builder(cls: type[Reward]) -> Callable[..., Reward]:
    def build(**params: Any) -> Reward:
        return build_reward(cls, params, cls.name)

    return build


REWARDS: dict[str, RewardInfo] = {
    info.name: info
    for info in (
        RewardInfo(
            "rhyme",
            "AABB/ABAB rhyme from the CMU dictionary; no self-rhymes, one-word lines or couplets",
            _builder(RhymeReward),
            _params(RhymeReward),
        ),
        RewardInfo(
            "relevance",
            "MiniLM cosine to the reference answer, rescaled to [0, 1] (token-F1 fallback)",
            _builder(RelevanceReward),
            _params(RelevanceReward),
        ),
        RewardInfo(
            "rhyme_relevance",
            "answer in rhyme and stay correct: min(1, relevance/0.4) x rhyme + 0.3 x relevance",
            RhymeRelevanceReward.from_params,
            tuple(
                p
                for p in (
                    *_params(RhymeRelevanceReward),
                    *_params(RhymeReward),
                    *_params(RelevanceReward),
                )
                if p not in ("rhyme", "relevance")
            ),
        ),
        RewardInfo(
            "tool_call",
            "right tool and arguments; rollout, OpenAI wire and <tool_call> text shapes agree",
            _builder(ToolCallReward),
            _params(ToolCallReward),
        ),
        RewardInfo(
            "judge",
            "an OpenAI-compatible judge model scores answers against your rubric, a group of "
            "answers per prompt (RULER-like) or one at a time; None where it cannot grade",
            lambda **params: JudgeReward.from_params(get_reward, **params),
            (*_params(JudgeReward), "rubric_file"),
            {"rubric": "(your rubric)", "base_url": "http://127.0.0.1:8011/v1", "model": "judge"},
        ),
    )
}


def get_reward(ref: str, params: Mapping[str, Any] | None = None) -> Reward:
    """A reward by registry name or `file.py:function` / `module:function` reference."""
    params = dict(params or {})
    info = REWARDS.get(ref)
    if info is not None:
        unknown = sorted(set(params) - set(info.parameters))
        if unknown:
            raise ConfigError(
                f"reward '{ref}' has no parameter {unknown}; allowed: {list(info.parameters)}"
            )
        return info.build(**params)
    if ":" in ref:
        value_range = params.pop("value_range", None)
        extra = {"value_range": _value_range(value_range)} if value_range is not None else {}
        return UserReward(ref=ref, params=params, **extra)
    raise ConfigError(
        f"unknown reward '{ref}'; use one of {sorted(REWARDS)} or your own as "
        f"'path/to/file.py:function' (TRL signature: completions, **columns -> list[float])"
    )


def confine_reward(ref: str, roots: list[Path] | None = None) -> None:
    """A reward given as path/to/file.py:function must name a file inside the roots."""
    if ref in REWARDS or ":" not in ref:
        return
    target, _ = split_ref(ref)
    if is_file_ref(target):
        confine(target, "reward file", roots)


def _value_range(value: Any) -> tuple[float, float]:
    """params.value_range of a user reward: [low, high], two numbers with low < high."""
    ok = (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )
    if ok:
        with contextlib.suppress(OverflowError):  # an int of 5,000 digits is no float
            low, high = float(value[0]), float(value[1])
            if low < high:  # NaN fails this too
                return low, high
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "..."
    raise ConfigError(
        f"reward params.value_range is {shown}: give two numbers [low, high] with low < high, "
        f"e.g. [0, 1] (every score the reward returns must lie between them)"
    )
