"""data check reads the spec's own held-out file (eval.path) as evaluate will: its rows, the
ones training saw (by id, text or 8-grams), and whether enough are left to judge by, said
before anything is trained. Two tasks that are not rhyme: tool-calling SFT (directly and over
MCP) and arithmetic GRPO (from a shell, piped, in words and in --json)."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from mcp import Client

from posttrain.server.app import build_server
from posttrain.tools.data import check_dataset
from tests.evals.test_eval_terms import HELD, TRAIN, sft_spec, write

SUM = """
import re
def exact(completions, total, **columns):
    return [float(re.findall(r"-?\\d+", c)[-1:] == [str(t)]) for c, t in zip(completions, total)]
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path


def test_an_sft_spec_shows_its_held_out_file_and_the_rows_training_saw(folder):
    seen_by_text = {**TRAIN[7], "id": "held-new-id"}  # a training row under a new id
    write(folder / "train.jsonl", TRAIN)
    write(folder / "held.jsonl", [*HELD, TRAIN[3], seen_by_text])
    spec = sft_spec("train.jsonl", path="held.jsonl")
    report = check_dataset(spec)
    held = report.eval_file
    assert held is not None and held.path == "held.jsonl"
    assert (held.rows, held.clean, held.used) == (62, 60, 60)
    assert held.dropped["same_id"] == 1 and held.dropped["same_text"] == 1
    dropped = [p for p in report.problems if p.startswith("evaluate will drop")]
    assert dropped and "2 of 62 rows of eval.path 'held.jsonl'" in dropped[0]
    assert not any("evaluate will refuse" in p for p in report.problems)

    async def over_mcp():
        async with Client(build_server()) as client:
            return await client.call_tool("check_dataset", {"spec": spec})

    answer = asyncio.run(over_mcp())
    assert not answer.is_error, answer.content
    assert answer.structured_content["eval_file"]["clean"] == 60

    plain = check_dataset(sft_spec("train.jsonl"))  # no eval.path: nothing said of one
    assert plain.eval_file is None and not any("eval.path" in p for p in plain.problems)


def test_an_arithmetic_spec_from_a_shell_says_evaluate_would_refuse_a_file_training_saw(folder):
    rows = [{"question": f"What is {i} + {i + 3}?", "total": 2 * i + 3} for i in range(60)]
    write(folder / "sums.jsonl", rows)
    write(folder / "sums_held.jsonl", [*rows[:3], {"question": "What is 500 + 7?", "total": 507}])
    (folder / "exact.py").write_text(SUM)
    spec = {
        "model": "tiny-local",
        "dataset": {"path": "sums.jsonl", "prompt_column": "question", "holdout_share": 0},
        "reward": {"name": "exact.py:exact"},
        "algorithm": {"kind": "grpo", "steps": 5},
        "eval": {"path": "sums_held.jsonl"},
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "POSTTRAIN_HOME": str(folder / "home"), "COLUMNS": "200"}

    def data_check(*flags: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "posttrain.cli", "data", "check", "spec.json", *flags],
            capture_output=True,  # piped, as an agent's shell reads it
            text=True,
            env=env,
            cwd=folder,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    report = json.loads(data_check("--json"))
    assert report["eval_file"]["rows"] == 4 and report["eval_file"]["clean"] == 1
    assert report["eval_file"]["dropped"]["same_id"] == 3  # the same row: the same content id
    refused = [p for p in report["problems"] if p.startswith("evaluate will refuse it")]
    assert (
        refused
        and "only 1 clean held-out tasks remain in eval.path 'sums_held.jsonl'" in (refused[0])
    )
    assert "add rows to the file that training never saw" in refused[0]
    words = data_check()
    assert "eval.path sums_held.jsonl: 4 rows, 1 never seen in training" in words
    assert "evaluate will refuse it" in " ".join(words.split())
