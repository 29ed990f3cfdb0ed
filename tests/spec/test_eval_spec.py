"""The spec's eval section as a user writes it: a held-out file of their own (eval.path) and
the rewards they want measured (eval.metrics), each bad value refused naming the field and
the fix; a spec that names neither keeps the id it had before they existed."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.runs.inputs import modal_inputs
from posttrain.spec.schema import load_spec

SFT = {
    "model": "tiny-local",
    "dataset": {"builtin": "rhyme-gym", "response_column": "response"},
    "algorithm": {"kind": "sft"},
}


def with_eval(**fields) -> dict:
    return {**SFT, "eval": fields}


@pytest.fixture
def heldout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"prompt": "a", "response": "b"}) + "\n", encoding="utf-8")
    return path


def test_metrics_are_written_as_rewards_are_by_name_or_with_params_and_a_label(heldout):
    spec = load_spec(
        with_eval(
            path="mine.jsonl",
            metrics=["tool_call", {"name": "tool_call", "label": "call_v2", "params": {}}],
        )
    )
    assert spec.eval.path == "mine.jsonl"
    assert [m.reported for m in spec.eval.metrics] == ["tool_call", "call_v2"]
    file_metric = load_spec(with_eval(metrics=["metrics/score.py:closeness"])).eval.metrics[0]
    assert file_metric.reported == "closeness"  # a file's metric: its function's name


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"path": "gone.jsonl"}, "eval.path': 'gone.jsonl' does not exist; give an existing"),
        ({"path": "notes.txt"}, "not a .jsonl, .json, .parquet or .csv file"),
        ({"metrics": ["judge"]}, "give it as eval.judge"),
        ({"metrics": ["tool_cal"]}, "unknown reward 'tool_cal'; use one of"),
        ({"metrics": [{"name": "tool_call", "params": {"column": "x"}}]}, "allowed: ['label_"),
        ({"metrics": ["tool_call", "tool_call"]}, "eval.metrics[1] would be reported as 'tool_"),
        ({"metrics": [{"name": "tool_call", "label": "reward"}]}, "give it a label of its own"),
        ({"metrics": [{"name": "tool_call", "label": "two words"}]}, "eval.metrics.0.label"),
    ],
)
def test_a_bad_eval_field_is_refused_naming_the_field_and_the_fix(heldout, fields, says):
    with pytest.raises(ConfigError) as refused:
        load_spec(with_eval(**fields))
    assert says in str(refused.value)


def test_eval_path_outside_the_allowed_folders_is_refused_before_it_is_looked_at(tmp_path, heldout):
    inside = tmp_path / "inside"
    inside.mkdir()
    with pytest.raises(ConfigError, match=r"eval\.path.*outside the allowed folders"):
        load_spec(with_eval(path=str(heldout)), roots=[inside])


def test_metrics_of_single_answers_are_refused_for_episodes_in_an_environment():
    spec = {"model": "tiny-local", "environment": "calculator"}
    spec["eval"] = {"metrics": ["tool_call"]}
    with pytest.raises(ConfigError, match=r"drop eval\.metrics, or score the episodes"):
        load_spec(spec)


def test_a_spec_naming_neither_keeps_the_id_it_had_before_they_existed():
    # the ids of these specs before eval.path and eval.metrics were added (main, 2026-12-07)
    assert load_spec({"model": "tiny-local", "eval": {"pass_threshold": 0.5}}).spec_id == (
        "517293632cab7406"
    )
    assert load_spec(with_eval(pass_threshold=0.5)).spec_id == "2ea5d0c9174fd19b"
    assert load_spec(with_eval(metrics=["tool_call"])).spec_id != "2ea5d0c9174fd19b"


def test_a_modal_container_is_never_sent_the_held_out_file_or_the_metrics(heldout, home):
    spec = load_spec(
        {**with_eval(path="mine.jsonl", metrics=["tool_call"], pass_threshold=0.5),
         "model": "Qwen3-0.6B", "compute": {"backend": "modal"}}
    )  # fmt: skip
    inputs = modal_inputs(spec)
    assert inputs.spec["eval"]["pass_threshold"] == 0.5  # the rest of the section as it was
    assert (inputs.spec["eval"]["path"], inputs.spec["eval"]["metrics"]) == (None, [])
    assert all(u.field != "eval.path" for u in inputs.uploads)
    load_spec(inputs.spec)  # the container's spec loads where the file is not
