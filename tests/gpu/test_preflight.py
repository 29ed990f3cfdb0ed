"""The guards that run before step 1, with the real tiny tokenizer and real rewards."""

import json

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.data.dataset import prepare
from posttrain.gpu.tiny import build_tokenizer
from posttrain.rewards.registry import get_reward
from posttrain.spec.schema import load_spec


def preflight(*args):
    """posttrain.gpu.train's preflight, imported when a test runs (the trainer's module pulls in
    transformers and peft: collecting this file stays cheap)."""
    from posttrain.gpu.train import preflight as check

    return check(*args)


class Sink:
    """Collects what preflight reports."""

    def __init__(self):
        self.lines = []

    def log(self, message, level="info"):
        self.lines.append((level, message))


def run_preflight(spec_dict, reward=None):
    spec = load_spec(spec_dict)
    data = algorithm_of(spec).prepare(spec.dataset)
    reward = reward or get_reward(spec.reward.name, spec.reward.params)
    sink = Sink()
    data, _ = preflight(spec, data, build_tokenizer(), reward, sink)
    return data, sink


GYM = {"builtin": "rhyme-gym", "n_rows": 100, "system_prompt": "answer in rhyme"}


def test_a_good_spec_passes_and_reports_its_rows():
    data, sink = run_preflight({"dataset": GYM, "reward": "rhyme"})
    assert len(data.train) + len(data.holdout) == 100
    assert any("training rows" in message for _, message in sink.lines)


def test_prompts_over_the_length_limit_are_refused():
    with pytest.raises(
        ConfigError,
        match=r"100 of \d+ prompts|prompts are longer than "
        r"max_prompt_length=8",
    ):
        run_preflight({"dataset": GYM, "reward": "rhyme", "algorithm": {"max_prompt_length": 8}})


def test_a_reward_that_ignores_the_completion_is_refused(tmp_path):
    (tmp_path / "constant.py").write_text(
        "def score(completions, **kw):\n    return [0.0 for _ in completions]\n"
    )
    with pytest.raises(ConfigError, match="all zero on references, echoed prompts and empty"):
        run_preflight({"dataset": GYM, "reward": f"{tmp_path}/constant.py:score"})


def test_a_reward_needing_a_column_the_rows_lack_is_refused(tmp_path):
    (tmp_path / "needs.py").write_text(
        "def score(completions, gold_answer, **kw):\n    return [0.0 for _ in completions]\n"
    )
    with pytest.raises(ConfigError, match=r"needs dataset column\(s\) \['gold_answer'\]"):
        run_preflight({"dataset": GYM, "reward": f"{tmp_path}/needs.py:score"})


def test_the_holdout_is_stable_and_disjoint_from_training():
    spec = load_spec({"dataset": {**GYM, "holdout_share": 0.2}})
    a, b = prepare(spec.dataset, "prompts"), prepare(spec.dataset, "prompts")
    assert [r["id"] for r in a.holdout] == [r["id"] for r in b.holdout]
    assert not {r["id"] for r in a.holdout} & {r["id"] for r in a.train}
    assert 10 <= len(a.holdout) <= 30


def test_a_row_the_real_qwen_template_cannot_render_is_named_with_the_reason(tmp_path):
    from posttrain.gpu.tokenizers import load_tokenizer

    rows = [
        {
            "id": f"r{i}",
            "messages": [
                {"role": "user", "content": f"Question {i}?"},
                {"role": "assistant", "content": f"Answer {i}."},
            ],
        }
        for i in range(5)
    ]
    rows[3]["id"] = "broken-row"
    rows[3]["messages"].insert(0, {"role": "system", "content": [{"type": "text", "text": "x"}]})
    data_file = tmp_path / "chats.jsonl"
    data_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = load_spec(
        {
            "model": "Qwen3-0.6B",
            "dataset": {"path": str(data_file), "messages_column": "messages", "holdout_share": 0},
            "algorithm": {"kind": "sft"},
        }
    )
    data = prepare(spec.dataset, "targets")
    tokenizer = load_tokenizer("Qwen3-0.6B").tokenizer
    with pytest.raises(ConfigError, match=r"row 3 \(id broken-row\) does not render .*TypeError"):
        preflight(spec, data, tokenizer, None, Sink())
