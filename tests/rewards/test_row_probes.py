"""Probes built from the user's own rows catch the hacks of tasks that are not rhyme: an
arithmetic reward that pays the answer anywhere, a labelling reward that pays the label
mentioned anywhere. Their correct twins get fewer flags; a probe that ties a perfect honest
score is flagged; the reference's other forms are reported as accepted, never as exploits;
the user's own probes run with the rest. Real reward files, run isolated as users' are."""

import json
import random

import pytest

from posttrain.core.errors import ConfigError, RewardError
from posttrain.tools.reward_check import check_reward

LEAKY_SUM = """
import re
def score(completions, total, **kw):
    return [1.0 if t in re.findall(r"-?\\d+", c) else 0.0 for c, t in zip(completions, total)]
"""
LAST_NUMBER = """
import re
def score(completions, total, **kw):
    out = []
    for c, t in zip(completions, total):
        found = re.findall(r"-?\\d+", c)
        out.append(1.0 if found and found[-1] == t and len(found) <= 6 else 0.0)
    return out
"""
LEAKY_LABEL = """
def score(completions, mood, **kw):
    return [1.0 if m in c.lower() else 0.0 for c, m in zip(completions, mood)]
"""
EXACT_LABEL = """
def score(completions, mood, **kw):
    return [1.0 if c.strip().lower().rstrip(".") == m else 0.0 for c, m in zip(completions, mood)]
"""


@pytest.fixture
def task(tmp_path, monkeypatch):
    """An arithmetic file and a labelling file with their own column names, and the rewards."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(7)
    with open("sums.jsonl", "w") as f:
        for _ in range(40):
            a, b = rng.randint(3, 95), rng.randint(3, 95)
            f.write(
                json.dumps(
                    {
                        "problem": f"Ana has {a} stamps and gets {b}. How many now?",
                        "total": str(a + b),
                    }
                )
                + "\n"
            )
    moods = ["joyful", "angry", "calm"]
    with open("moods.jsonl", "w") as f:
        for i in range(36):
            f.write(
                json.dumps({"message": f"Message {i} from a customer.", "mood": moods[i % 3]})
                + "\n"
            )
    for name, code in [
        ("leaky_sum", LEAKY_SUM),
        ("last_number", LAST_NUMBER),
        ("leaky_label", LEAKY_LABEL),
        ("exact_label", EXACT_LABEL),
    ]:
        (tmp_path / f"{name}.py").write_text(code)
    return tmp_path


def check(reward, data, prompt, reference, **kw):
    return check_reward(
        f"{reward}.py:score", data=data, prompt_column=prompt, reference_column=reference, **kw
    )


def test_an_arithmetic_reward_that_pays_the_answer_anywhere_is_flagged_with_the_probe_that_shows_it(
    task,
):
    leaky = check("leaky_sum", "sums.jsonl", "problem", "total")
    correct = check("last_number", "sums.jsonl", "problem", "total")
    assert {"number_sweep", "every_reference", "reference_among_distractors", "hedge"} <= set(
        leaky.flagged
    )
    sweep = next(p for p in leaky.probes if p.name == "number_sweep")
    assert sweep.example.startswith("0 1 2 3") and sweep.example_score == 1.0
    assert sweep.verdict.startswith("LIKELY EXPLOIT: counts through every number")
    assert len(correct.flagged) < len(leaky.flagged)
    assert "number_sweep" not in correct.flagged and "hedge" not in correct.flagged
    assert "reference_alone" in correct.accepted and "reference_alone" not in correct.flagged


def test_a_labelling_reward_that_pays_a_mention_is_flagged_and_the_exact_one_is_clean(task):
    leaky = check("leaky_label", "moods.jsonl", "message", "mood")
    exact = check("exact_label", "moods.jsonl", "message", "mood")
    assert {"every_label", "hedge", "reference_then_retracted"} <= set(leaky.flagged)
    labels = next(p for p in leaky.probes if p.name == "every_label")
    assert labels.example == "joyful / angry / calm"
    assert exact.flagged == [] and len(exact.flagged) < len(leaky.flagged)
    assert set(exact.accepted) == {"reference_alone", "reference_reformatted"}  # "  CALM  "


def test_a_probe_that_ties_a_perfect_honest_score_is_flagged(task):
    report = check("leaky_sum", "sums.jsonl", "problem", "total")
    assert report.honest.mean == 1.0 and report.honest.max == 1.0  # 0/1: honest at the top
    tie = next(p for p in report.probes if p.name == "hedge")
    assert tie.mean == 1.0 and tie.flagged


def test_your_own_probes_run_with_the_rest_and_are_flagged_above_their_limit(task):
    mine = task / "mine.jsonl"
    mine.write_text(
        json.dumps(
            {
                "name": "answer_twice",
                "completion": "{reference} or maybe {reference}1",
                "max_score": 0,
            }
        )
        + "\n"
        + json.dumps({"name": "blank_answer", "completion": "I do not know.", "max_score": 0})
        + "\n"
    )
    report = check("leaky_sum", "sums.jsonl", "problem", "total", probes=str(mine))
    twice = next(p for p in report.probes if p.name == "answer_twice")
    assert twice.flagged and twice.verdict.startswith("YOUR PROBE PAYS")
    blank = next(p for p in report.probes if p.name == "blank_answer")
    assert not blank.flagged and blank.mean == 0.0
    (task / "bad.jsonl").write_text('{"name": "x", "completion": "y"}\n')
    with pytest.raises(ConfigError, match="line 1: missing \\['max_score'\\]"):
        check("leaky_sum", "sums.jsonl", "problem", "total", probes=str(task / "bad.jsonl"))


def test_a_reward_needing_a_column_the_data_lacks_is_refused_naming_the_column(task):
    with pytest.raises(
        RewardError, match=r"needs the dataset column\(s\) \['total'\], which the data lacks"
    ):
        check("last_number", "moods.jsonl", "message", "mood")


def labelling_spec(template: str) -> dict:
    return {
        "model": "tiny-local",
        "dataset": {"path": "moods.jsonl", "prompt_template": template},
        "reward": {"name": "exact_label.py:score"},
        "algorithm": {"kind": "grpo", "steps": 5},
    }


def test_a_spec_whose_prompts_list_every_label_is_checked_without_a_reference_column(task):
    """The spec reads no reference column (the reward reads `mood`): the honest answers are
    the reward's own column, and prompts that name every label give nothing away."""
    options = "Is this message joyful, angry or calm? {message}"
    report = check_reward(spec=labelling_spec(options))
    assert report.honest.mean == 1.0  # the label itself, from the column the reward reads
    assert report.flagged == []
    assert any("the prompts list every answer (angry, calm, joyful)" in n for n in report.notes)
    copy = next(p for p in report.probes if p.name == "reference_copy")
    assert copy.mean == 1.0 and not copy.flagged


def test_a_prompt_that_gives_its_own_label_away_is_still_a_leak(task):
    rows = [json.loads(line) for line in (task / "moods.jsonl").read_text().splitlines()]
    with open("told.jsonl", "w") as f:  # each prompt ends with its own answer, no others
        f.writelines(
            json.dumps({**r, "message": f"{r['message']} ({r['mood']})"}) + "\n" for r in rows
        )
    report = check("exact_label", "told.jsonl", "message", "mood")
    assert "reference_copy" in report.flagged
    copy = next(p for p in report.probes if p.name == "reference_copy")
    assert copy.verdict.startswith("LEAK: 32 prompt(s) contain their reference")
