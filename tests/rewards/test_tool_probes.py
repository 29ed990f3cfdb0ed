"""check_reward on tool-calling rows: each wrong call a policy could be paid for is scored and
reported, and a reward that pays one more than half is flagged."""

import json
import re
from dataclasses import dataclass
from typing import ClassVar

import pytest

from posttrain.data import tool_gym
from posttrain.rewards.base import Reward, Scores, column
from posttrain.rewards.probe_families import DEGENERATE_SHORT
from posttrain.rewards.probes import run_probes
from posttrain.rewards.tool_call import normalise_calls
from posttrain.rewards.tool_probes import TOOL_PROBES
from posttrain.tools.reward_check import check_reward

WRONG = {p.name for p in TOOL_PROBES if p.kind == "wrong_call"}


@pytest.fixture
def project(tmp_path, monkeypatch):
    tool_gym.write(tmp_path, n=24)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_check_reward_tool_call_on_a_users_spec_reports_every_probe_and_flags_none(project):
    report = check_reward("tool_call", spec="tool_sft.yaml")
    scores = {p.name: p for p in report.probes}
    assert set(scores) == {p.name for p in (*TOOL_PROBES, *DEGENERATE_SHORT)}
    assert {p.family for p in report.probes} == {"tool", "generic"}
    assert report.honest.mean == 1.0  # the expected calls, written as the model writes them
    assert report.flagged == [] and not any("score as high" in w for w in report.warnings)
    for name in WRONG:
        assert scores[name].mean <= 0.5, (name, scores[name].verdict)
    assert scores["code_fence"].mean == 0.0 and scores["no_call"].mean == 0.0
    assert scores["prose_around_call"].mean == 1.0  # reported; Qwen's parser reads the call
    assert "reported, not judged" in scores["prose_around_call"].verdict
    assert "```json" in scores["code_fence"].example
    assert any("expect no call" in n for n in report.notes)  # multi-turn rows: a final answer


def test_reward_check_data_on_a_messages_file_reads_it_as_the_spec_does(project):
    """`reward check tool_call --data chats.jsonl` from a shell, output piped: the file's
    conversations and tool schemas are found without a spec, and the probes are the spec's."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "posttrain.cli", "reward", "check", "tool_call"]
    answer = subprocess.run(
        [*command, "--data", "tool_chats.jsonl", "--reference-column", "expected", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
    by_data = json.loads(answer.stdout)
    spec = (project / "tool_sft.yaml").read_text().replace("holdout_share: 0.2", "holdout_share: 0")
    (project / "every_row.yaml").write_text(spec)  # the rows --data probes: all of them
    by_spec = check_reward("tool_call", spec="every_row.yaml").model_dump(mode="json")
    means = {p["name"]: p["mean"] for p in by_data["probes"]}
    assert set(means) == {p.name for p in (*TOOL_PROBES, *DEGENERATE_SHORT)}
    assert means == {p["name"]: p["mean"] for p in by_spec["probes"]}
    assert by_data["honest"]["mean"] == 1.0 and by_data["flagged"] == []


@dataclass(frozen=True)
class NameOnly(Reward):
    """A lenient reward a user might write: any JSON object naming the right tool pays 1."""

    name: ClassVar[str] = "name_only"
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    @property
    def columns(self) -> tuple[str, ...]:
        return ("expected",)

    def score(self, completions, **columns) -> Scores:
        labels = column(columns, "expected", len(completions), self.name)
        out = []
        for text, label in zip(completions, labels, strict=True):
            found = re.search(r"\{.*\}", text, re.DOTALL)
            try:
                name = json.loads(found.group(0)).get("name") if found else None
            except json.JSONDecodeError:
                name = None
            out.append(float(name == normalise_calls(label)[0][0]))
        return Scores(rewards=out)


def test_a_reward_that_pays_the_right_name_alone_is_flagged_for_each_wrong_call():
    rows = [
        {
            "prompt": r["conversation"][1]["content"],
            "expected": r["expected"],
            "tools": r["functions"],
        }
        for r in tool_gym.rows(24)
        if isinstance(r["expected"], dict)
    ]
    report = run_probes(NameOnly(), rows, reference_column="expected")
    flagged = set(report.flagged)
    assert {"invented_argument", "wrong_types", "right_tool_wrong_values", "code_fence"} <= flagged
    assert {"empty", "no_call", "prose_around_call"}.isdisjoint(flagged)
    verdict = next(p.verdict for p in report.probes if p.name == "wrong_types")
    assert verdict.startswith("PAYS A WRONG CALL") and "half the range 0.50" in verdict
