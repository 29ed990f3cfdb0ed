from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from posttrain.core.errors import RewardError
from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.guards import Guarded, checked_scores


@dataclass(frozen=True)
class Scripted(Reward):
    """Returns fixed values, or raises on completions containing 'boom'."""

    name: ClassVar[str] = "scripted"
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    values: tuple[Any, ...] = ()

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        if any("boom" in c for c in completions):
            raise ZeroDivisionError("division by zero")
        return Scores(
            rewards=list(self.values[: len(completions)])
            if self.values
            else [0.5] * len(completions)
        )


def test_a_reward_that_raises_names_the_offending_example():
    with pytest.raises(
        RewardError, match=r"raised ZeroDivisionError.*example 2 \(completion 'boom"
    ):
        checked_scores(Scripted(), ["fine", "also fine", "boom here"])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((0.5, None), r"returned None \(cannot grade\) for example 1"),
        ((0.5, float("nan")), "returned nan for example 1"),
        ((float("inf"), 0.5), "returned inf for example 0"),
        ((0.5, 1.5), r"returned 1.5, outside its declared range \[0.0, 1.0\] for example 1"),
        ((0.5, "high"), r"returned a str \('high'\), not a number"),
    ],
)
def test_bad_values_are_refused_with_the_example(values, message):
    with pytest.raises(RewardError, match=message):
        checked_scores(Scripted(values=values), ["first", "second"])


def test_the_wrong_number_of_values_is_refused():
    with pytest.raises(RewardError, match="returned 1 values for 2 completions"):
        checked_scores(Scripted(values=(0.5,)), ["a", "b"])


def test_guarded_reward_is_what_trl_calls():
    guarded = Guarded(Scripted())
    assert guarded.__name__ == "scripted"
    assert guarded(completions=["a", "b"], prompts=["p", "q"]) == [0.5, 0.5]
