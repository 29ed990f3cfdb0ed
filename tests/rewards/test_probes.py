import json
from pathlib import Path

import pytest

from posttrain.core.errors import ConfigError
from posttrain.rewards.probes import PROBES, run_probes
from posttrain.rewards.registry import get_reward

NAIVE = {"min_words_per_line": 0, "distinct_end_words": False, "identical_rhymes_count": True}


def test_the_battery_has_every_probe_the_issue_names():
    assert {p.name for p in PROBES} == {
        "empty",
        "whitespace",
        "one_word_lines",
        "same_end_word",
        "repeated_line",
        "padded_to_limit",
        "prompt_copy",
        "reference_copy",
        "one_long_line",
        "forty_short_lines",
        "thinking_only",
        "markdown_bullets",
        "rhyming_gibberish",
        "rhyming_off_topic",
        "prose_on_topic",
    }


def test_a_naive_rhyme_reward_is_caught_by_the_self_rhyme_and_one_word_probes(qa_rows):
    report = run_probes(get_reward("rhyme", NAIVE), qa_rows, honest_column="verse")
    assert {"same_end_word", "one_word_lines"} <= set(report.flagged)
    flagged = {p.name: p for p in report.probes}
    assert "LIKELY EXPLOIT" in flagged["one_word_lines"].verdict
    assert flagged["one_word_lines"].example_score == pytest.approx(1.0)


def test_the_hardened_rhyme_reward_flags_neither_exploit(qa_rows):
    report = run_probes(get_reward("rhyme"), qa_rows, honest_column="verse")
    assert "same_end_word" not in report.flagged
    assert "one_word_lines" not in report.flagged
    # What rhyme alone cannot know is still reported: it does not read meaning.
    assert {"rhyming_off_topic", "rhyming_gibberish"} <= set(report.flagged)


def test_the_canonical_reward_flags_nothing_on_the_bundled_rows(qa_rows):
    report = run_probes(get_reward("rhyme_relevance"), qa_rows, honest_column="verse")
    assert report.flagged == []
    assert report.honest.mean > 1.0


def test_a_reward_reading_the_wrong_field_is_reported_as_degenerate(qa_rows, tmp_path: Path):
    reward_file = tmp_path / "wrong_field.py"
    reward_file.write_text(
        "def score(completions, **columns):\n"
        "    # reads a column that is always empty instead of the completion\n"
        "    return [float(len(columns.get('missing_field') or '') > 0) for _ in completions]\n"
    )
    report = run_probes(get_reward(f"{reward_file}:score"), qa_rows, honest_column="verse")
    assert report.honest.degenerate == "all zero"
    assert any("all zero on every response" in w for w in report.warnings)
    assert report.flagged == []  # nothing scores above a floor of zero


def test_a_leaked_reference_is_flagged(qa_rows):
    leaky = [{**r, "prompt": r["prompt"] + " Answer: " + r["reference"]} for r in qa_rows]
    report = run_probes(get_reward("relevance"), leaky)
    assert "reference_copy" in report.flagged


def test_a_missing_column_is_a_clear_error(qa_rows):
    with pytest.raises(ConfigError, match="dataset column 'answer' is missing from row 0"):
        run_probes(get_reward("relevance"), qa_rows, reference_column="answer")


def test_rows_with_an_empty_reference_do_not_crash_the_battery(qa_rows):
    rows = [{**r, "reference": ""} if i % 2 else r for i, r in enumerate(qa_rows)]
    report = run_probes(get_reward("rhyme"), rows)
    assert {"one_word_lines", "same_end_word"}.isdisjoint(report.flagged)


def test_prose_references_under_a_rhyme_reward_are_judged_against_its_range(tmp_path):
    from posttrain.tools.reward_check import check_reward

    rows = [
        {"instruction": f"{q} ({i})", "input": "", "output": a}
        for i, (q, a) in enumerate(
            [
                ("Give three tips for staying healthy.", "Eat well, sleep enough, move daily."),
                ("Why is the sky blue?", "Air scatters blue light more than red light."),
                ("What is the capital of Japan?", "Tokyo is the capital of Japan."),
                ("How do plants make food?", "Plants use sunlight, water and carbon dioxide."),
            ]
            * 3
        )
    ]
    data = tmp_path / "alpaca.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = check_reward(
        "rhyme_relevance", data=str(data), prompt_column="instruction", reference_column="output"
    )
    assert report.honest.mean < 0.65  # prose pays relevance only: 0.3 of the range 0..1.3
    assert report.flagged == []  # no probe is an exploit just because prose scored as prose
    verdicts = {p.name: p.verdict for p in report.probes}
    assert verdicts["prose_on_topic"].startswith("not judged")
    assert any("judged against the range instead (flagged at 0.65" in n for n in report.notes)
