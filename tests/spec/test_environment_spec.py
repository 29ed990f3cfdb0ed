"""The spec's `environment:` field: errors that name the field and the fix, and a spec with
a plan that says what multi-turn training costs beyond one turn."""

import hashlib
import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.spec.schema import load_spec


@pytest.mark.parametrize(
    ("environment", "words"),
    [
        ({"name": "calculater"}, "neither a built-in environment (['calculator'])"),
        ({"name": "envs/missing.py:Env"}, "environment.name file 'envs/missing.py' does not"),
        ({"name": "calculator", "tools": "t.py:[f]"}, "give exactly one of environment.name"),
        ({"tools": "t.py:f"}, "is not 'path/to/file.py:[function, ...]'"),
        ({"name": "calculator", "max_turns": 0}, "environment.max_turns"),
        ({"name": "calculator", "turns": 3}, "turns"),
    ],
)
def test_a_bad_environment_field_is_named_with_its_fix(environment, words):
    with pytest.raises(ConfigError, match="environment") as caught:
        load_spec({"environment": environment})
    assert words in str(caught.value)


def test_an_environment_needs_grpo_and_plans_with_a_note_on_multi_turn_cost(home):
    with pytest.raises(ConfigError, match=r"works with algorithm\.kind 'grpo'"):
        load_spec({"environment": "calculator", "algorithm": {"kind": "sft"}})
    from posttrain.tools.plan import plan

    spec = load_spec({"environment": "calculator", "model": "Qwen3-0.6B"})
    assert spec.reward is None  # the environment's get_reward scores; no default is filled in
    warnings = plan(spec).warnings
    assert any(w.startswith("multi-turn episodes: each step samples up to 9") for w in warnings)
    assert not any("environment" in w for w in warnings if w.startswith("launch would answer"))
    assert not any("SFT trains without one" in w for w in warnings)


def test_a_spec_without_an_environment_keeps_the_id_it_had_before_the_field_existed():
    plain = load_spec({"model": "tiny-local"})
    # the dump of a spec before `environment`, `eval`, the preference, distillation and KTO
    # fields and the warmup existed: none of their keys in it
    old_fields = plain.model_dump(
        mode="json",
        exclude={
            "name": True,
            "environment": True,
            "eval": True,
            "algorithm": {"dpo": True, "teacher": True, "kto": True, "warmup_steps": True},
            "dataset": {"chosen_column": True, "rejected_column": True, "label_column": True},
        },
    )
    canonical = json.dumps(old_fields, sort_keys=True, separators=(",", ":"))
    assert plain.spec_id == hashlib.sha256(canonical.encode()).hexdigest()[:16]
    with_env = load_spec({"model": "tiny-local", "environment": "calculator"})
    assert with_env.spec_id != plain.spec_id
    with_bar = load_spec({"model": "tiny-local", "eval": {"pass_threshold": 0.5}})
    assert with_bar.spec_id != plain.spec_id
    warmed = load_spec({"model": "tiny-local", "algorithm": {"warmup_steps": 5}})
    assert warmed.spec_id != plain.spec_id


def test_an_environment_file_outside_the_roots_is_refused_before_it_is_looked_at(tmp_path):
    inside = tmp_path / "project"
    inside.mkdir()
    with pytest.raises(ConfigError, match="outside the allowed folders"):
        load_spec({"environment": {"name": f"{tmp_path / 'env.py'}:Env"}}, roots=[inside])
    with pytest.raises(ConfigError, match="outside the allowed folders"):
        load_spec({"environment": {"tools": f"{tmp_path / 'tools.py'}:[f]"}}, roots=[inside])
