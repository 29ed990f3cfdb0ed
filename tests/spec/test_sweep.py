"""An experiment's sweep: arms expanded from the user's keys, named by their overrides, every
key checked against the spec's model, bounds said in the error. Pure and fast."""

import pytest

from posttrain.core.errors import ConfigError
from posttrain.spec.schema import RunSpec
from posttrain.spec.sweep import MAX_ARMS, MAX_RUNS, arms, check_keys, split_sweep

BASE = {
    "model": {"name": "Qwen3-0.6B", "chat_template_kwargs": {"enable_thinking": False}},
    "dataset": {"path": "data/math.jsonl", "prompt_template": "{question}"},
    "reward": {"name": "my_reward.py:score", "params": {"tolerance": 0.1}},
    "algorithm": {"learning_rate": 1e-5, "lora": None},
}


def sweep_of(**block):
    base, sweep = split_sweep({**BASE, "sweep": block})
    return base, sweep


def test_a_grid_takes_every_combination_in_order_and_names_each_arm_by_its_overrides():
    base, sweep = sweep_of(**{"algorithm.learning_rate": [1e-5, 5e-5], "lora.r": [8, 32]})
    got = arms(base, sweep)
    assert [a.name for a in got] == [
        "learning_rate=1e-05,r=8",
        "learning_rate=1e-05,r=32",
        "learning_rate=5e-05,r=8",
        "learning_rate=5e-05,r=32",
    ]
    assert got[3].overrides == {"algorithm.learning_rate": 5e-5, "algorithm.lora.r": 32}
    assert got[3].spec["algorithm"] == {"learning_rate": 5e-5, "lora": {"r": 32}}
    assert "sweep" not in got[0].spec and BASE["algorithm"]["lora"] is None  # the base untouched


def test_a_swept_model_name_keeps_the_rest_of_the_base_models_section():
    base, sweep = sweep_of(model=["Qwen3-0.6B", "Qwen3-1.7B"], seeds=[0, 1])
    second = arms(base, sweep)[1]
    assert second.name == "model=Qwen3-1.7B"
    assert second.spec["model"] == {
        "name": "Qwen3-1.7B",
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert sweep.seeds == [0, 1]


def test_keys_of_the_same_last_name_are_named_whole():
    base, sweep = sweep_of(
        **{"algorithm.learning_rate": [1e-5], "algorithm.warmstart.learning_rate": [2e-3]}
    )
    assert arms(base, sweep)[0].name == (
        "algorithm.learning_rate=1e-05,algorithm.warmstart.learning_rate=0.002"
    )


def test_a_misspelt_key_is_refused_with_the_field_it_meant_before_any_arm_is_built():
    _, sweep = sweep_of(**{"algorithm.learnin_rate": [1e-5, 5e-5]})
    with pytest.raises(ConfigError, match=r"did you mean 'algorithm\.learning_rate'"):
        check_keys(sweep, RunSpec)
    _, inside_params = sweep_of(**{"reward.params.tolerance": [0.1, 0.2]})
    check_keys(inside_params, RunSpec)  # a reward's params are the reward's to check


def test_random_mode_draws_the_same_arms_for_the_same_seed_within_its_ranges():
    block = {
        "mode": "random",
        "samples": 5,
        "seed": 3,
        "algorithm.learning_rate": {"low": 1e-6, "high": 1e-3, "log": True},
        "lora.r": [8, 16, 32],
    }
    first = arms(*sweep_of(**block))
    again = arms(*sweep_of(**block))
    assert [a.overrides for a in first] == [a.overrides for a in again]
    rates = [a.overrides["algorithm.learning_rate"] for a in first]
    assert all(1e-6 <= r <= 1e-3 for r in rates) and len(set(rates)) == len(rates)
    assert {a.overrides["algorithm.lora.r"] for a in first} <= {8, 16, 32}


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ({}, "give a mapping"),
        ({"seeds": [0, 1]}, "names no spec key"),
        ({"algorithm.learning_rate": {"low": 0.1, "high": 1}}, "needs `mode: random`"),
        ({"mode": "random", "algorithm.learning_rate": [1e-5]}, "needs samples: N"),
        ({"algorithm.learning_rate": [1e-5], "seeds": [1, 1]}, "distinct seeds"),
        ({"algorithm.learning_rate": [1e-5], "max_parallel": 0}, "sweep.max_parallel"),
        ({"algorithm.learning_rate": list(range(17))}, "give 1 to 16 values"),
    ],
)
def test_a_malformed_sweep_names_the_field_and_the_fix(block, says):
    with pytest.raises(ConfigError, match=says):
        split_sweep({**BASE, "sweep": block})


def test_too_many_arms_or_runs_are_refused_with_the_bound():
    many = {"algorithm.learning_rate": [1e-5, 2e-5, 3e-5, 4e-5, 5e-5], "lora.r": [4, 8, 16, 32]}
    with pytest.raises(ConfigError, match=f"20 arms, more than {MAX_ARMS}"):
        arms(*sweep_of(**many))
    runs = {"algorithm.learning_rate": [1e-5, 2e-5, 3e-5, 4e-5, 5e-5], "seeds": list(range(7))}
    with pytest.raises(ConfigError, match=f"5 arms x 7 seeds = 35 runs, more than {MAX_RUNS}"):
        arms(*sweep_of(**runs))
