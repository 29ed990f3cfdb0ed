"""Preference rows in every form a user's file takes them, shaped as TRL's DPOTrainer reads
them: text, conversations, one message as a dict, JSON strings, TRL's implicit-prompt form;
and the mistakes that would train on the wrong text refused, naming the column."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import prepare
from posttrain.spec.schema import load_spec

USER = {"role": "user", "content": "Combien font 2 + 2 ?"}


def shaped(tmp_path, rows, **dataset):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    spec = load_spec(
        {
            "model": "Qwen3-0.6B",
            "algorithm": {"kind": "dpo"},
            "dataset": {"path": str(path), "holdout_share": 0.0, **dataset},
        }
    )
    return prepare(spec.dataset, "pairs").train


def test_text_pairs_get_the_system_prompt_and_the_template(tmp_path):
    [row] = shaped(
        tmp_path,
        [{"q": "2 + 2", "good": "4", "bad": "5"}],
        prompt_template="Compute {q}.",
        system_prompt="Be exact.",
        chosen_column="good",
        rejected_column="bad",
    )
    assert row["prompt"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Compute 2 + 2."},
    ]
    assert row["chosen"] == [{"role": "assistant", "content": "4"}]
    assert row["rejected"] == [{"role": "assistant", "content": "5"}]
    assert row["reference"] == "4" and row["prompt_text"] == "Compute 2 + 2."


def test_conversations_single_messages_and_json_strings_are_read_alike(tmp_path):
    answer = {"role": "assistant", "content": "4"}
    rows = shaped(
        tmp_path,
        [
            {"prompt": [USER], "chosen": [answer], "rejected": "5"},
            {"prompt": json.dumps([USER]), "chosen": answer, "rejected": json.dumps([answer])},
        ],
    )
    assert [r["prompt"] for r in rows] == [[USER], [USER]]
    assert [r["chosen"] for r in rows] == [[answer], [answer]]
    assert rows[0]["prompt_text"] == "Combien font 2 + 2 ?"


def test_answers_that_look_like_json_stay_the_text_the_user_wrote(tmp_path):
    """Arithmetic and labelling answers: numbers, booleans, lists and label objects in the
    file are the answers' text, byte for byte, never parsed and printed back."""
    rows = shaped(
        tmp_path,
        [
            {"prompt": "1000 in scientific notation?", "chosen": "1e3", "rejected": "1000.0"},
            {"prompt": "Is 7 prime?", "chosen": "true", "rejected": "false"},
            {"prompt": "Roots of x^2 - 7x + 12?", "chosen": "[3, 4]", "rejected": "[2, 6]"},
            {"prompt": "Label: 'WIN A PRIZE'", "chosen": {"label": "spam"}, "rejected": 12},
            {"prompt": "[1, 2] + [3]?", "chosen": "[1, 2, 3]", "rejected": []},
        ],
    )
    said = [
        (r["prompt_text"], r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in rows
    ]
    assert said == [
        ("1000 in scientific notation?", "1e3", "1000.0"),
        ("Is 7 prime?", "true", "false"),
        ("Roots of x^2 - 7x + 12?", "[3, 4]", "[2, 6]"),
        ("Label: 'WIN A PRIZE'", '{"label": "spam"}', "12"),
        ("[1, 2] + [3]?", "[1, 2, 3]", ""),  # an empty list is an empty answer
    ]


def test_the_implicit_prompt_form_splits_at_the_conversations_common_start(tmp_path):
    good = {"role": "assistant", "content": "4"}
    bad = {"role": "assistant", "content": "22"}
    rows = shaped(
        tmp_path,
        [
            {"chosen": [USER, good], "rejected": [USER, bad]},
            {"chosen": [USER, good], "rejected": [USER, good]},  # identical: still split
        ],
    )
    assert [r["prompt"] for r in rows] == [[USER], [USER]]
    assert rows[0]["chosen"] == [good] and rows[0]["rejected"] == [bad]
    assert rows[1]["chosen"] == rows[1]["rejected"] == [good]


def test_a_conversation_pasted_into_a_template_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="column 'prompt', which holds a conversation"):
        shaped(
            tmp_path,
            [{"prompt": [USER], "chosen": "4", "rejected": "5"}],
            prompt_template="Q: {prompt}",
        )


def test_an_answer_that_holds_the_users_turn_beside_a_prompt_column_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="column 'chosen' must hold the assistant's answer"):
        shaped(tmp_path, [{"prompt": "2 + 2?", "chosen": [USER], "rejected": "5"}])


def test_a_missing_answer_column_is_named_before_the_prompt(tmp_path):
    with pytest.raises(ConfigError, match="dataset column 'worse' is missing"):
        shaped(tmp_path, [{"chosen": "4", "rejected": "5"}], rejected_column="worse")
