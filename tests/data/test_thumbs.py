"""Thumbs-up/down feedback as products store it: every spelling of a label read, a file with its
own column names (question, bot_reply, rating with 👍/👎) shaped as TRL's KTOTrainer reads it,
and the flags `data check` raises on it, each naming the rows and the fix."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import read_rows
from posttrain.data.kto_rows import answer_column, kto_columns, kto_flags, kto_row
from posttrain.data.kto_settings import KtoSpec
from posttrain.data.thumbs import Feedback, balancing, parse_label, thumbs_flags
from posttrain.spec.schema import load_spec

UP = [True, 1, 1.0, "1", "1.0", "+1", ":+1:", "true", "True", "TRUE", "t", "yes", "Y", "up",
      "Up", "good", "GOOD", "positive", "desirable", "👍", "👍🏽", "👍️", " 👍 ", "thumbs_up",
      "Thumbs Up", "thumbs-up", "thumbsup", ":thumbsup:", "like", "accepted"]  # fmt: skip
DOWN = [False, 0, 0.0, -1, "0", "0.0", "-1", ":-1:", "false", "False", "f", "no", "N", "down",
        "DOWN", "bad", "Bad", "negative", "undesirable", "👎", "👎🏿", "thumbs_down",
        "Thumbs Down", "thumbsdown", "dislike", "rejected"]  # fmt: skip
UNREADABLE = [None, "", "  ", 2, 0.5, float("nan"), "5 stars", "meh", "👌", [1], {"up": 1}]


@pytest.mark.parametrize("value", UP)
def test_every_spelling_of_a_thumbs_up_reads_desirable(value):
    assert parse_label(value) is True


@pytest.mark.parametrize("value", DOWN)
def test_every_spelling_of_a_thumbs_down_reads_undesirable(value):
    assert parse_label(value) is False


@pytest.mark.parametrize("value", UNREADABLE)
def test_a_label_that_is_none_of_the_forms_reads_none_never_a_guess(value):
    assert parse_label(value) is None


def test_balancing_follows_trls_eq8_arithmetic_and_suggests_raising_the_smaller_side():
    # 90 up, 10 down: TRL says desirable_weight in [0.11, 0.15] or undesirable in [6.77, 9.0]
    b = balancing(90, 10)
    assert b.desirable_range == (0.11, 0.15) and b.undesirable_range == (6.77, 9.0)
    assert not b.in_range and b.suggestion == ("undesirable_weight", 9.0)
    # 10 up, 30 down: raise desirable_weight to 3 (TRL's doc: 1:3 -> [3, 3.99])
    b = balancing(10, 30)
    assert b.desirable_range == (3.0, 3.99) and b.suggestion == ("desirable_weight", 3.0)
    assert balancing(10, 30, desirable_weight=3.5).in_range
    assert balancing(50, 50).in_range


# --- A product's own export: its column names, emoji labels, the problems it has ---------

QUESTIONS = ["Où est la gare ?", "Explain Zürich's trams", "日本の桜はいつ？", "What is 2+2?",
             "Write a haiku about jazz", "Is piñata Spanish?"]  # fmt: skip


def export() -> list[dict]:
    rows = []
    for i in range(24):
        q = QUESTIONS[i % len(QUESTIONS)]
        rows.append(
            {
                "conversation_id": f"c{i}",
                "question": f"{q} (#{i})",
                "bot_reply": f"A helpful answer to {q} 🙂" if i % 2 else f"Dunno. {q}",
                "rating": "👍" if i % 2 else "👎",
            }
        )
    rows[4]["bot_reply"] = ""  # empty answers
    rows[7]["bot_reply"] = "   "
    rows[10]["rating"] = "5 stars"  # unreadable labels
    rows[11]["rating"] = None
    return rows


def spec_for(tmp_path, rows, **dataset):
    path = tmp_path / "feedback.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return load_spec(
        {
            "model": "Qwen3-0.6B",
            "algorithm": {"kind": "sft"},  # until kind 'kto' is wired into the schema
            "dataset": {
                "path": str(path),
                "prompt_column": "question",
                "response_column": "bot_reply",
                "holdout_share": 0.0,
                **dataset,
            },
        }
    )


def shaped(spec, label_column="rating"):
    rows = read_rows(spec.dataset.path)
    answer = kto_columns(spec.dataset, rows, label_column)[0]
    return [kto_row(r, spec.dataset, label_column, answer) for r in rows]


def test_a_feedback_row_is_shaped_as_trls_kto_reads_it(tmp_path):
    spec = spec_for(tmp_path, export(), system_prompt="Réponds brièvement.")
    rows = shaped(spec)
    first, down = rows[1], rows[0]
    assert first["id"] != down["id"]
    assert first["prompt"] == [
        {"role": "system", "content": "Réponds brièvement."},
        {"role": "user", "content": "Explain Zürich's trams (#1)"},
    ]
    assert first["completion"] == [
        {"role": "assistant", "content": "A helpful answer to Explain Zürich's trams 🙂"}
    ]
    assert (first["label"], first["label_value"]) == (True, "👍")
    assert (down["label"], down["label_value"]) == (False, "👎")
    # the reference is the answer only where the raters wanted it
    assert first["reference"] == "A helpful answer to Explain Zürich's trams 🙂"
    assert down["reference"] is None
    assert rows[10]["label"] is None and rows[10]["label_value"] == "5 stars"
    assert first["conversation_id"] == "c1"  # the user's other columns kept


def test_data_check_flags_empty_answers_and_unreadable_labels_naming_the_rows(tmp_path):
    rows = shaped(spec_for(tmp_path, export()))
    flags = kto_flags(rows, "rating")
    empty = next(f for f in flags if "empty answer" in f)
    assert empty.startswith("2 of 24 rows")
    assert repr(rows[4]["id"]) in empty and repr(rows[7]["id"]) in empty
    unread = next(f for f in flags if "cannot be read" in f)
    assert unread.startswith("2 of 24 rows") and "column 'rating'" in unread
    assert f"row {rows[10]['id']!r} (" in unread and "'5 stars'" in unread
    assert f"row {rows[11]['id']!r} (" in unread and ": None" in unread
    assert "👍/👎" in unread and "dataset.filters" in unread
    assert len(flags) == 2  # 11 up, 11 down besides the unreadable ones: balanced


def test_one_sided_feedback_is_flagged_with_what_to_do_for_each_side(tmp_path):
    ups = [{**r, "rating": "up"} for r in export()[:8]]
    [flag] = [f for f in kto_flags(shaped(spec_for(tmp_path, ups))) if "one-sided" in f]
    assert "all 8 readable labels are desirable" in flag and "kind: sft" in flag
    downs = [{**r, "rating": 0} for r in export()[:8]]
    [flag] = [f for f in kto_flags(shaped(spec_for(tmp_path, downs))) if "one-sided" in f]
    assert "undesirable (👎)" in flag and "conservative learning rate" in flag


def test_a_strong_imbalance_is_flagged_with_trls_weights_and_quiet_once_they_are_set(tmp_path):
    rows = [{**r, "rating": "👍" if i < 20 else "👎"} for i, r in enumerate(export())]
    rows = [{**r, "bot_reply": r["bot_reply"] or "ok"} for r in rows]
    rows = [{**r, "bot_reply": r["bot_reply"].strip() or "ok"} for r in rows]
    kto = shaped(spec_for(tmp_path, rows))
    [flag] = kto_flags(kto, "rating")
    assert flag.startswith("strong imbalance: 20 desirable to 4 undesirable answers (5.0:1)")
    assert "`algorithm.kto.undesirable_weight: 5`" in flag
    assert "desirable_weight within [0.2, 0.27]" in flag
    assert kto_flags(kto, "rating", KtoSpec(undesirable_weight=5.0)) == []
    assert kto_flags(kto, "rating", KtoSpec(desirable_weight=0.25)) == []


def test_the_answer_column_falls_back_to_the_reference_then_trls_completion(tmp_path):
    trl_form = [{"prompt": "Hi", "completion": "Hello!", "label": True}]
    spec = load_spec(
        {"model": "Qwen3-0.6B", "algorithm": {"kind": "sft"},
         "dataset": {"path": str(spec_for(tmp_path, export()).dataset.path)}}
    )  # fmt: skip
    assert answer_column(spec.dataset, ["completion", "label", "prompt"]) == "completion"
    assert answer_column(spec.dataset, ["completion", "prompt", "reference"]) == "reference"
    [row] = [kto_row(r, spec.dataset) for r in trl_form]
    assert row["completion"] == [{"role": "assistant", "content": "Hello!"}]
    assert row["label"] is True
    with pytest.raises(ConfigError, match=r"set dataset\.response_column"):
        answer_column(spec.dataset, ["prompt", "label"])


def test_a_missing_label_column_is_refused_naming_it(tmp_path):
    spec = spec_for(tmp_path, export())
    with pytest.raises(ConfigError, match="dataset column 'thumbs' is missing"):
        kto_columns(spec.dataset, read_rows(spec.dataset.path), "thumbs")


def test_conversational_prompts_and_answers_in_trls_form_are_kept_as_messages(tmp_path):
    rows = [
        {
            "prompt": [{"role": "user", "content": "Combien font 2 + 2 ?"}],
            "completion": [{"role": "assistant", "content": "4"}],
            "label": "good",
        }
    ]
    spec = load_spec(
        {"model": "Qwen3-0.6B", "algorithm": {"kind": "sft"},
         "dataset": {"path": str(spec_for(tmp_path, export()).dataset.path)}}
    )  # fmt: skip
    [row] = [kto_row(r, spec.dataset) for r in rows]
    assert row["prompt"] == [{"role": "user", "content": "Combien font 2 + 2 ?"}]
    assert row["prompt_text"] == "Combien font 2 + 2 ?"
    assert row["completion"] == [{"role": "assistant", "content": "4"}]


def test_flags_read_plain_records_too():
    rows = [Feedback("a", "yes", True, "👍"), Feedback("b", "", False, "👎")]
    [flag] = thumbs_flags(rows, "rating")
    assert "rows 'b'" in flag


def test_a_file_without_ids_has_its_unreadable_labels_and_empty_answers_found_by_prompt():
    """An arithmetic file with no id column: the flags name each row by its hash and the start
    of its prompt, so the user can find it."""
    from posttrain.data.thumbs import Feedback, thumbs_flags

    rows = [
        Feedback("a1", "5", True, "👍", "What is 2 + 3?"),
        Feedback("b2", "", False, "no", "What is 6 + 19?"),
        Feedback("c3", "9", None, "maybe", "What is 4 + 5?"),
    ]
    flags = thumbs_flags(rows, "verdict")
    empty = next(f for f in flags if "empty answer" in f)
    assert "'b2' ('What is 6 + 19?')" in empty
    unread = next(f for f in flags if "cannot be read" in f)
    assert "row 'c3' ('What is 4 + 5?'): 'maybe'" in unread
