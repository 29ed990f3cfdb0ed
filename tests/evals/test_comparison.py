"""compare_scores on anyone's rows, and `posttrain compare` on a file, from a shell with its
output piped: verdicts, the best arm named only beyond noise, and bad rows named by line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from posttrain.core.errors import ConfigError
from posttrain.evals.comparison import compare_scores, read_scores


def rows(effects, n=60, k=4, replicates=2, seed=0):
    """A row per sample: arm -> gain over a task difficulty every arm shares."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.6, n)
    return [
        {"arm": arm, "replicate": r, "task": f"q{t}", "score": int(rng.random() < p[t] + gain)}
        for arm, gain in effects.items()
        for r in range(replicates)
        for t in range(n)
        for _ in range(k)
    ]


def test_a_clear_gain_is_improved_and_named_best_and_equal_arms_are_not():
    result = compare_scores(rows({"base": 0, "big": 0.35, "same": 0}, n=80))
    by = {a.arm: a for a in result.arms}
    assert result.baseline == "base" and by["base"].verdict == "baseline"
    assert by["big"].verdict == "improved" and by["big"].ci_low > 0
    assert by["same"].verdict == "within_noise" and by["same"].ci_low < 0 < by["same"].ci_high
    assert result.best == "big" and by["same"].behind_leader and by["base"].behind_leader
    equal = compare_scores(rows({"a": 0, "b": 0, "c": 0}, seed=1))
    assert equal.best is None and equal.best_reason.startswith("tied within noise")


def test_a_row_per_sample_is_averaged_into_its_task_before_anything_else():
    # two samples of one task (0 and 1) make its mean 0.5: the delta counts tasks, not samples
    data = [{"arm": "base", "replicate": 0, "task": t, "score": 0.0} for t in range(6)] + [
        {"arm": "new", "replicate": 0, "task": t, "score": s} for t in range(6) for s in (0, 1)
    ]
    new = compare_scores(data).arms[1]
    assert new.delta == pytest.approx(0.5) and new.samples == 12 and new.tasks == 6
    assert new.verdict == "improved" and new.se == 0  # every task moved alike


def test_minimize_turns_lower_into_better():
    data = rows({"base": 0.3, "low": 0.0}, n=80)
    assert compare_scores(data, goal="minimize").arms[1].verdict == "improved"
    assert compare_scores(data).arms[1].verdict == "worse"


def test_too_few_tasks_get_no_verdict_and_say_why():
    result = compare_scores(rows({"base": 0, "x": 0.5}, n=4))
    assert result.arms[1].verdict == "insufficient_data"
    assert result.arms[1].reason == "4 paired tasks < 5" and result.best is None


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"arm": "x", "replicate": 0, "task": "q1"}, r"row 3: missing \['score'\]"),
        ({"arm": "x", "replicate": 0, "task": "q1", "score": "high"}, "row 3: score 'high'"),
        ({"arm": "x", "replicate": 0, "task": "q1", "score": float("nan")}, "row 3: score nan"),
        ({"replicate": 0, "task": "q1", "score": 1}, r"row 3: missing \['arm'\]"),
    ],
)
def test_a_bad_row_is_named_by_its_place(bad, error):
    good = [{"arm": "base", "replicate": 0, "task": "q1", "score": 1}] * 2
    with pytest.raises(ConfigError, match=error):
        compare_scores([*good, bad])


def test_an_arm_on_other_tasks_is_refused_naming_it_and_its_line(tmp_path):
    path = tmp_path / "scores.jsonl"
    lines = [{"arm": "base", "replicate": 0, "task": f"q{t}", "score": 1} for t in range(6)]
    lines += [{"arm": "other", "replicate": 0, "task": f"z{t}", "score": 1} for t in range(6)]
    path.write_text(
        "\n".join(json.dumps(r) for r in lines[:3])
        + "\n\n"
        + "\n".join(json.dumps(r) for r in lines[3:])
    )
    data, numbers = read_scores(path)
    assert numbers[:4] == [1, 2, 3, 5]  # the blank line keeps the file's numbering
    with pytest.raises(ConfigError, match=r"arm 'other' \(first at line 8\) shares no task"):
        compare_scores(data, lines=numbers)


def test_posttrain_compare_answers_on_a_small_file_piped_and_as_one_json(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows({"base": 0, "tuned": 0.3}, n=30)))
    cmd = [sys.executable, "-m", "posttrain.cli", "compare", str(path)]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "tuned" in text and "improved" in text and "best: tuned" in text
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    assert result["best"] == "tuned" and result["arms"][1]["verdict"] == "improved"
    csv = tmp_path / "scores.csv"
    csv.write_text("arm,replicate,task,score\nbase,0,a,1\nbase,0,b,zero\n")
    bad = subprocess.run([*cmd[:-1], str(csv), "--json"], capture_output=True, text=True)
    assert bad.returncode == 2 and "line 3: score 'zero' is not a number" in bad.stderr


def test_an_agent_compares_a_file_and_inline_rows_over_mcp_and_a_path_outside_is_refused(
    tmp_path,
):
    import asyncio

    from mcp import Client

    from posttrain.server.app import build_server

    path = tmp_path / "scores.jsonl"
    data = rows({"base": 0, "tuned": 0.3}, n=30)
    path.write_text("\n".join(json.dumps(r) for r in data))

    async def go():
        async with Client(build_server(roots=[tmp_path]), mode="legacy") as client:
            by_file = await client.call_tool("compare_scores", {"scores": str(path)})
            inline = await client.call_tool("compare_scores", {"scores": data})
            outside = await client.call_tool("compare_scores", {"scores": "/etc/passwd"})
            bad = await client.call_tool("compare_scores", {"scores": [{"arm": "a"}]})
            return by_file, inline, outside, bad

    by_file, inline, outside, bad = asyncio.run(go())
    assert not by_file.is_error and by_file.structured_content["best"] == "tuned"
    assert not inline.is_error and inline.structured_content["arms"][0]["arm"] == "base"
    assert outside.is_error and "outside" in outside.content[0].text
    assert bad.is_error and "row 1: missing ['replicate', 'task', 'score']" in bad.content[0].text
