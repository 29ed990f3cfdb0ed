"""The algorithm's kinds: an unknown one is refused with the list of those that exist, and
each kind's own settings are taken only with it."""

import pytest

from posttrain.algorithms.kinds import ALGORITHMS as KINDS
from posttrain.core.errors import ConfigError
from posttrain.spec.schema import load_spec


def test_a_kind_that_does_not_exist_lists_the_kinds_that_do():
    with pytest.raises(ConfigError) as caught:
        load_spec({"model": "tiny-local", "algorithm": {"kind": "ppo"}})
    message = str(caught.value)
    assert "algorithm.kind" in message and "'ppo' does not exist" in message
    for kind in KINDS:
        assert f"'{kind}'" in message


def test_a_misspelt_kind_gets_the_one_it_resembles():
    with pytest.raises(ConfigError, match="did you mean 'dpo'"):
        load_spec({"model": "tiny-local", "algorithm": {"kind": "dop"}})


def test_dpo_takes_trls_defaults_and_its_own_columns(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"prompt": "p", "better": "a", "worse": "b"}\n')
    spec = load_spec(
        {
            "model": "tiny-local",
            "algorithm": {"kind": "dpo"},
            "dataset": {
                "path": str(tmp_path / "x.jsonl"),
                "chosen_column": "better",
                "rejected_column": "worse",
            },
        }
    )
    assert (spec.algorithm.dpo.beta, spec.algorithm.dpo.loss_type) == (0.1, "sigmoid")
    assert spec.dataset.pair_columns == ("better", "worse")
    assert load_spec({"model": "tiny-local"}).dataset.pair_columns == ("chosen", "rejected")


@pytest.mark.parametrize(
    "algorithm, words",
    [
        ({"kind": "sft", "dpo": {"beta": 0.2}}, "algorithm.dpo works with kind 'dpo'"),
        ({"kind": "grpo", "teacher": "Qwen3-8B"}, "algorithm.teacher works with kind 'distill'"),
        ({"kind": "distill"}, "kind 'distill' needs algorithm.teacher"),
        ({"kind": "dpo", "dpo": {"loss_type": "nope"}}, "loss_type"),
    ],
)
def test_settings_of_another_kind_are_refused_naming_the_field(algorithm, words):
    with pytest.raises(ConfigError, match=words):
        load_spec({"model": "tiny-local", "algorithm": algorithm})
