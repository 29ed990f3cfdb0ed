"""The least a user writes for each path is enough: the defaults are decided by what the path
needs (a reference column only where the reward or the SFT target reads one; chat rows need
none). Each spec below goes through what `posttrain smoke` does before it starts anything
(the dry-run cut, then the launch's resolve: the data's columns against the spec and its
reward), on files written as a user would. The environment path's dry run itself is
tests/gpu/test_environment_training.py; the judge's, tests/tools/test_judge_dry_run.py."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data import tool_gym
from posttrain.runs.context import Context
from posttrain.tools.launch import smoke_resolve
from tests.envfiles import WAREHOUSE


@pytest.fixture
def project(tmp_path, monkeypatch, home):
    monkeypatch.chdir(tmp_path)
    lines = [{"frage": f"Was ist {i} + {i}?", "antwort": str(2 * i)} for i in range(40)]
    (tmp_path / "sums.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8"
    )
    (tmp_path / "score.py").write_text(
        "def score(completions, **kw):\n    return [float('4' in str(c)) for c in completions]\n"
    )
    tool_gym.write(tmp_path, n=24)
    pairs = [{"prompt": f"Was ist {i} + {i}?", "chosen": str(2 * i), "rejected": str(2 * i + 1)}
             for i in range(40)]  # fmt: skip
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    (tmp_path / "warehouse.py").write_text(WAREHOUSE)
    orders = [
        {"task": f"Reserve {i + 1} widgets.", "item": "widget", "quantity": i + 1}
        for i in range(20)
    ]
    (tmp_path / "orders.jsonl").write_text("".join(json.dumps(r) + "\n" for r in orders))
    return tmp_path


MINIMAL = {
    "text GRPO, the user's reward": {
        "dataset": {"path": "sums.jsonl", "prompt_column": "frage"},
        "reward": "score.py:score",
    },
    "text GRPO, a reward that reads the reference": {
        "dataset": {"path": "sums.jsonl", "prompt_column": "frage", "reference_column": "antwort"},
        "reward": "relevance",
    },
    "text SFT": {
        "dataset": {"path": "sums.jsonl", "prompt_column": "frage", "response_column": "antwort"},
        "algorithm": {"kind": "sft"},
    },
    "tool SFT on chats": {
        "dataset": {
            "path": "tool_chats.jsonl",
            "messages_column": "conversation",
            "tools_column": "functions",
        },
        "algorithm": {"kind": "sft"},
    },
    "DPO on prompt/chosen/rejected": {
        "dataset": {"path": "pairs.jsonl"},
        "algorithm": {"kind": "dpo"},
    },
    "environment": {
        "dataset": {"path": "orders.jsonl", "prompt_column": "task"},
        "environment": "warehouse.py:Warehouse",
    },
    "judge": {
        "dataset": {"path": "sums.jsonl", "prompt_column": "frage"},
        "reward": {
            "name": "judge",
            "params": {
                "rubric": "Is the sum right?",
                "base_url": "http://127.0.0.1:8011/v1",
                "model": "m",
            },
        },
    },
}


@pytest.mark.parametrize("path", list(MINIMAL))
def test_the_minimal_spec_of_each_path_resolves_as_a_dry_run(project, path):
    plan, dry = smoke_resolve({"model": "Qwen3-0.6B", **MINIMAL[path]}, ctx=Context())
    assert dry is not None and plan.spec.model.stand_in  # the dry run of the user's spec
    assert plan.spec.dataset.path.endswith(MINIMAL[path]["dataset"]["path"])


def test_a_reward_that_reads_the_reference_says_which_column_it_needs(project):
    reads = {"dataset": {"path": "sums.jsonl", "prompt_column": "frage"}, "reward": "relevance"}
    with pytest.raises(ConfigError, match=r"dataset column 'reference' is missing.*antwort"):
        smoke_resolve({"model": "Qwen3-0.6B", **reads}, ctx=Context())
    none = {**reads, "dataset": {**reads["dataset"], "reference_column": None}}
    with pytest.raises(ConfigError, match=r"reads each row's reference.*reference_column is null"):
        smoke_resolve({"model": "Qwen3-0.6B", **none}, ctx=Context())
    sft = {"dataset": reads["dataset"], "algorithm": {"kind": "sft"}}  # no target at all
    with pytest.raises(ConfigError, match=r"dataset column 'reference' is missing"):
        smoke_resolve({"model": "Qwen3-0.6B", **sft}, ctx=Context())
