"""One rule for each verdict whatever asks for it: the gym's warnings only for the gym, and a
reward check that never advises the reward it is testing."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.probes import run_probes
from posttrain.tools.plan import plan
from tests.conftest import EXAMPLES
from tests.specs import tiny


@dataclass
class LaxRhymeRelevance(Reward):
    """A rhyme_relevance whose gate lets anything of four lines through."""

    name: ClassVar[str] = "rhyme_relevance"
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        return Scores([float(str(c).count("\n") == 3) for c in completions])


def test_a_flagged_probe_never_advises_the_reward_under_test(qa_rows):
    report = run_probes(LaxRhymeRelevance(), qa_rows, honest_column="verse")
    gibberish = next(p for p in report.probes if p.name == "rhyming_gibberish")
    assert gibberish.flagged
    assert "(rhyme_relevance)" not in gibberish.verdict
    assert (
        "rhyme_relevance is the usual fix (gate the rhyme on relevance to the reference) "
        "and it still pays this" in gibberish.verdict
    )


def test_a_flagged_probe_under_another_reward_keeps_its_advice(qa_rows):
    @dataclass
    class LaxRhyme(LaxRhymeRelevance):
        name: ClassVar[str] = "rhyme"

    report = run_probes(LaxRhyme(), qa_rows, honest_column="verse")
    gibberish = next(p for p in report.probes if p.name == "rhyming_gibberish")
    assert gibberish.flagged
    assert "fix: gate the rhyme on relevance to the reference (rhyme_relevance)" in (
        gibberish.verdict
    )


def test_the_gyms_flat_reward_warning_is_given_for_the_gym_only(home):
    gym = plan(tiny(steps=40)).warnings
    assert any("on the tiny gym the reward sits flat" in w for w in gym)
    real = {**tiny(steps=40), "model": "Qwen3-4B", "compute": {"backend": "modal"}}
    assert not any("tiny gym" in w for w in plan(real).warnings)


@pytest.mark.slow
def test_a_reward_check_flags_the_same_probes_whether_asked_on_a_spec_or_on_columns(home):
    from posttrain.tools.reward_check import check_reward

    spec = {
        "dataset": {"path": str(EXAMPLES), "reference_column": "reference"},
        "reward": {"name": "rhyme_relevance", "params": {"reference_column": "reference"}},
    }
    on_spec = check_reward("rhyme_relevance", spec=spec, honest_column="verse")
    on_columns = check_reward(
        "rhyme_relevance",
        data=str(EXAMPLES),
        reference_column="reference",
        honest_column="verse",
    )
    assert on_spec.flagged == on_columns.flagged
    words = [[p.verdict.split(":")[0] for p in r.probes] for r in (on_spec, on_columns)]
    assert words[0] == words[1]  # each probe judged by the same rule ("ok", "not judged"...)
