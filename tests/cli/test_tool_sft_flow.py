"""The tool-calling SFT path as a user walks it, through the real CLI: their file (both call
shapes, multi-turn chats, unicode, a reference column of dicts and text) and their spec
(Qwen/Qwen2.5-1.5B-Instruct, SFT with LoRA, their own column names). `data check` passes;
the dry run succeeds and its traces carry the exact training text, with nothing added,
nothing double-encoded and every assistant turn marked; held-out answers are scored by their
own reward file as training goes; `run list` and `list_runs` still work and show it;
`check_reward tool_call` reports every probe's score."""

import json
import os
import re
import subprocess
import sys

import pytest

from posttrain.data import tool_gym
from posttrain.data.dataset import read_rows
from posttrain.gpu import tokenizers
from posttrain.rewards.probe_families import DEGENERATE_SHORT
from posttrain.rewards.tool_probes import TOOL_PROBES
from posttrain.tools.reward_check import check_reward
from posttrain.tools.runs import get_run, list_runs, sample_traces
from tests.conftest import kill_leftover_runs, own_rendering, wait_finished

pytestmark = pytest.mark.slow

USER_REWARD = '''
import json


def closeness(completions, expected, **kwargs):
    """1 / (1 + |length difference|) to their own reference column (a call as a dict, or text)."""
    texts = [c if isinstance(c, str) else c[-1]["content"] or "" for c in completions]
    refs = [r if isinstance(r, str) else json.dumps(r) for r in expected]
    return [1.0 / (1.0 + abs(len(t) - len(r))) for t, r in zip(texts, refs)]
'''


@pytest.fixture(scope="module")
def user(tmp_path_factory, empty_hf_home):
    """The user's folder with their 40 rows and spec; offline, an empty Hugging Face cache."""
    root = tmp_path_factory.mktemp("user")
    _, spec = tool_gym.write(root, n=40)
    # Their own reward scores held-out answers as training goes (a point every 50 steps).
    (root / "rewards").mkdir()
    (root / "rewards" / "closeness.py").write_text(USER_REWARD, encoding="utf-8")
    text = spec.read_text(encoding="utf-8")
    text = text.replace("  steps: 200\n", "  steps: 200\n  eval_every: 50\n  eval_tasks: 32\n")
    spec.write_text(text + "reward: rewards/closeness.py:closeness\n", encoding="utf-8")
    home = tmp_path_factory.mktemp("home")
    env = {
        "POSTTRAIN_HOME": str(home),
        "HF_HOME": str(empty_hf_home),
        "HF_HUB_OFFLINE": "1",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.chdir(root)
        tokenizers._load.cache_clear()
        yield root
        kill_leftover_runs(home)
        tokenizers._load.cache_clear()


def posttrain(*args: str) -> dict | list:
    """The CLI as a real process, in the user's folder, its JSON output parsed."""
    out = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def dry_run(user):
    started = posttrain("smoke", "tool_sft.yaml", "--detach")
    return started, wait_finished(started["run_id"], 1200)


def test_data_check_passes_and_marks_every_assistant_turn(user):
    report = posttrain("data", "check", "tool_sft.yaml")
    assert report["problems"] == [] and report["samples"]
    assert "every assistant turn" in report["loss"]
    for text, marked in zip(report["samples"], report["marked_samples"], strict=True):
        assert marked.replace("⟦", "").replace("⟧", "") == text
        assert marked.count("<|im_start|>assistant⟦") == text.count("<|im_start|>assistant")


def test_the_dry_run_succeeds_and_trains_on_the_users_rows_exactly(user, dry_run):
    _, detail = dry_run
    assert detail.status == "succeeded", detail.cause
    raw = {r["conversation"][1]["content"]: r for r in read_rows("tool_chats.jsonl")}
    tokenizer = tokenizers.load_tokenizer("Qwen2.5-1.5B-Instruct").tokenizer
    page = sample_traces(detail.run_id, steps="1-99", n=8)
    head = page.shared.get("trained", "")  # the head every row's text starts with, said once
    traced = [row for step in page.steps.values() for row in step]
    assert traced and all(row.trained for row in traced)
    multi_turn = 0
    for row in traced:
        source = raw[row.prompt]  # the row's question (multi-turn rows: the same)
        trained = head + row.trained
        text = trained.replace("⟦", "").replace("⟧", "")
        assert text == own_rendering(tokenizer, source)  # the user's row, byte for byte
        schemas = source["functions"]
        schemas = json.loads(schemas) if isinstance(schemas, str) else schemas
        shown = re.search(r"<tools>\n(.*)\n</tools>", text, re.DOTALL).group(1).splitlines()
        assert [json.loads(line) for line in shown] == schemas  # no key the row lacks
        answers = text.split("<|im_start|>assistant", 1)[1]
        calls = [json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", answers)]
        expected = [c.get("function", c) for c in source["conversation"][2]["tool_calls"]]
        assert calls == [
            {
                "name": c["name"],
                "arguments": json.loads(c["arguments"])
                if isinstance(c["arguments"], str)
                else c["arguments"],
            }
            for c in expected
        ]
        assert '"arguments": "' not in text and "null" not in text  # never double-encoded
        turns = text.count("<|im_start|>assistant")
        assert trained.count("<|im_start|>assistant⟦") == turns == trained.count("⟦")
        multi_turn += turns == 2
    assert multi_turn  # the traces include a call -> tool reply -> answer row


def test_after_the_dry_run_every_listing_still_works_and_shows_it(user, dry_run):
    started, detail = dry_run
    assert started["run_id"] in {r["run_id"] for r in posttrain("run", "list")}
    assert detail.run_id in {r.run_id for r in list_runs()}
    assert get_run(detail.run_id).dry_run["complete"]
    references = [
        row.reference
        for step in sample_traces(detail.run_id, steps="first", n=8).steps.values()
        for row in step
    ]
    assert any(ref.startswith('{"name": ') for ref in references)  # dicts, kept as JSON


def test_check_reward_tool_call_reports_each_probes_score(user):
    report = check_reward("tool_call", spec="tool_sft.yaml")
    assert [p.name for p in report.probes] == [p.name for p in (*TOOL_PROBES, *DEGENERATE_SHORT)]
    assert all(0.0 <= p.mean <= 1.0 and p.verdict for p in report.probes)
    cli = posttrain("reward", "check", "tool_call", "--spec", "tool_sft.yaml")
    assert {p["name"]: p["mean"] for p in cli["probes"]} == {p.name: p.mean for p in report.probes}


def test_the_dry_run_scores_held_out_answers_with_the_users_own_reward(user, dry_run):
    started, detail = dry_run
    assert started["dry_run"]["cuts"]["algorithm.eval_every"].startswith("50 -> 2")
    assert "stand-in of Qwen2.5-1.5B-Instruct: qwen2" in started["dry_run"]["stand_in"]
    curve = get_run(detail.run_id).heldout  # the held-out path ran too, with their reward
    assert [p["step"] for p in curve] == [0, 2, 4, 6]  # 6: after the resume
    assert all(p["n"] == 2 and p["reward"] is not None for p in curve)
    page = sample_traces(detail.run_id, steps="first", n=8)
    head = page.shared.get("rendered", "")  # what every row starts with, said once a page
    rows = [row for step in page.steps.values() for row in step]
    assert rows
    for row in rows:
        rendered = head + row.rendered  # the prompt the reward's completion answered
        assert rendered.startswith("<|im_start|>system\n") and "\n\n# Tools\n" in rendered
        assert rendered.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert row.reward is not None and 0 < row.reward <= 1  # their function scored it
