"""A Modal spec that names weights on this machine (the student's folder or .gguf file, the
teacher's folder) is refused by `plan` and by `launch` in the same words, naming the field,
the path and the fix, before anything is priced as a run or uploaded."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.tools.launch import launch
from posttrain.tools.plan import plan

MODAL = {"compute": {"backend": "modal", "gpu": "H100", "timeout_s": 600}}


@pytest.fixture
def folder(tmp_path, monkeypatch, home):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mein modell").mkdir()
    (tmp_path / "mein modell" / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (tmp_path / "klein.Q4.gguf").write_bytes(b"GGUF")
    return tmp_path


def refused_both_ways(spec: dict) -> str:
    """plan's refusal, checked to be launch's own words."""
    with pytest.raises(ConfigError) as at_launch:
        launch(spec)
    cost = plan(spec).cost
    assert cost.refused == str(at_launch.value)
    assert cost.alternative is None  # it is aimed at Modal already: no "on modal" price
    assert cost.summary == f"Cannot launch as written: {cost.refused}."
    return cost.refused


@pytest.mark.parametrize(
    ("name", "what"), [("./mein modell", "a folder"), ("klein.Q4.gguf", "a GGUF file")]
)
def test_a_local_student_model_is_refused_for_modal_naming_it(folder, name, what):
    refused = refused_both_ways({"model": name, **MODAL})
    assert refused.startswith(
        f"model.name '{name}' is {what} on this machine, which the Modal function cannot read"
    )
    assert "Push the model to the Hugging Face hub and name it by its hub id" in refused
    assert "Qwen3-0.6B" in refused  # the presets it could name instead


def test_a_local_teacher_is_refused_for_modal_as_the_student_is(folder):
    algorithm = {"kind": "distill", "teacher": "./mein modell"}
    refused = refused_both_ways({"model": "Qwen3-0.6B", "algorithm": algorithm, **MODAL})
    assert refused.startswith(
        "algorithm.teacher './mein modell' is a folder on this machine, which the Modal "
        "function cannot read"
    )


def test_the_same_local_student_is_planned_on_this_machine(folder):
    """Only Modal cannot read it: a local dry run of the folder is still planned."""
    spec = {"model": {"name": "./mein modell", "stand_in": True}}
    assert plan(spec).cost.refused is None
