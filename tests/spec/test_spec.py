import json

import pytest
import yaml

from posttrain.core.errors import ConfigError
from posttrain.spec.schema import load_spec

GOOD = {"model": "tiny-local", "dataset": {"builtin": "rhyme-gym"}, "algorithm": {"steps": 5}}


def test_a_spec_loads_from_a_dict_json_and_yaml_alike(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(GOOD))
    (tmp_path / "s.json").write_text(json.dumps(GOOD))
    ids = {
        load_spec(GOOD).spec_id,
        load_spec(tmp_path / "s.yaml").spec_id,
        load_spec(str(tmp_path / "s.json")).spec_id,
        load_spec(json.dumps(GOOD)).spec_id,
    }
    assert len(ids) == 1


def test_the_spec_id_is_stable_ignores_the_name_and_tracks_every_setting():
    base = load_spec(GOOD).spec_id
    assert load_spec({**GOOD, "name": "a label"}).spec_id == base
    assert load_spec({**GOOD, "algorithm": {"steps": 6}}).spec_id != base
    assert load_spec(GOOD).spec_id == base  # same input, same id, every time
    assert len(base) == 16


def test_defaults_resolve_to_a_runnable_spec():
    spec = load_spec({})
    assert spec.model.name == "tiny-local" and spec.algorithm.kind == "grpo"
    assert spec.gpu == "T4"  # the preset's default GPU
    assert load_spec({"model": "Qwen3-0.6B"}).model.template_kwargs() == {"enable_thinking": False}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"algorithm": {"lr": 1e-4}},
            r"'algorithm.lr': unknown field; did you mean 'learning_rate'\?",
        ),
        ({"algorithm": {"steps": "many"}}, r"'algorithm.steps': Input should be a valid integer"),
        ({"model": "Qwen3-0.7B"}, r"unknown model preset 'Qwen3-0.7B' \(did you mean"),
        ({"model": "./no/such/model"}, r"model path './no/such/model' does not exist"),
        ({"dataset": {"path": "no_such.jsonl"}}, r"dataset.path 'no_such.jsonl' does not exist"),
        ({"reward": "rhymez"}, r"unknown reward 'rhymez'"),
        ({"reward": {"name": "rhyme", "params": {"gate": 1}}}, r"has no parameter \['gate'\]"),
        ({"algorithm": {"batch_size": 30}}, r"must be divisible by num_generations \(8\)"),
        ({"compute": {"gpu": "H300"}}, r"unknown GPU type 'H300'"),
        ({"compute": {"timeout_s": 90000}}, r"over 24 h"),
        ({"colour": "red"}, r"'colour': unknown field"),
    ],
)
def test_bad_input_gets_one_clear_error_naming_the_field(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_spec(spec)


def test_a_missing_or_malformed_spec_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"spec file .* does not exist"):
        load_spec(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("model: [unclosed")
    with pytest.raises(ConfigError, match="is not valid yaml"):
        load_spec(tmp_path / "bad.yaml")


def test_a_missing_dataset_column_is_refused_before_anything_starts(tmp_path, home):
    from posttrain.tools.launch import launch

    data = tmp_path / "qa.jsonl"
    data.write_text('{"question": "why?", "answer": "because"}\n')
    spec = {
        "dataset": {
            "path": str(data),
            "prompt_template": "{question}",
            "reference_column": "reference",
        }
    }
    with pytest.raises(
        ConfigError,
        match=r"dataset column 'reference' is missing .* \['answer', "
        r"'question'\]",
    ):
        launch(spec)
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
