"""KTO as a user brings it: thumbs-up/down feedback exported from a support bot, with the
product's own column names (`question`, `bot_reply`, `rating` in emoji and words), some
replies empty and one rating nobody can read. Over MCP, through the real server and client:
data check shows each answer with its verdict and flags the empty answers and the unreadable
label by row; plan prices the spec; the dry run of a Qwen3 KTO spec trains on the stand-in
and says what it proved. From a shell with output piped: `data check --json` is one document
that carries the same flags."""

import asyncio
import json
import subprocess
import sys

import pytest
from mcp import Client

from posttrain.server.app import build_server
from tests.conftest import mcp_wait_finished, offline_in
from tests.specs import feedback_spec

pytestmark = pytest.mark.slow

RATINGS = ["👍", "👎", "thumbs_up", "down", "Good", "bad", "1", "0"]


def feedback_rows() -> list[dict]:
    rows = []
    for i in range(32):
        rating = RATINGS[i % len(RATINGS)]
        good = rating in ("👍", "thumbs_up", "Good", "1")
        reply = (
            f"Sorry about order {i}: a replacement ships today."
            if good
            else f"Order {i}? Ask someone else."
        )
        rows.append({"id": f"t{i}", "question": f"Where is my order {i}?", "bot_reply": reply,
                     "rating": rating})  # fmt: skip
    rows[3]["bot_reply"] = ""  # the bot answered nothing, and a rater judged it
    rows[11]["bot_reply"] = "   "
    rows[5]["rating"] = "meh"  # nobody can say which side this is
    return rows


SPEC = feedback_spec(steps=6, batch_size=4)


@pytest.fixture
def project(tmp_path, tmp_path_factory, empty_hf_home):
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in feedback_rows())
    (tmp_path / "feedback.jsonl").write_text(lines)
    (tmp_path / "kto.json").write_text(json.dumps(SPEC))
    with offline_in(tmp_path, tmp_path_factory, empty_hf_home):
        yield tmp_path


def _empty_and_unreadable(problems: list[str]) -> None:
    empty = next(p for p in problems if "empty answer" in p)
    assert "'t3'" in empty and "'t11'" in empty
    unreadable = next(p for p in problems if "meh" in p)
    assert "'t5'" in unreadable


def test_an_agent_checks_plans_and_dry_runs_a_kto_spec_over_mcp(project):
    async def main():
        async with Client(build_server()) as client:
            checked = await client.call_tool("check_dataset", {"spec": SPEC})
            assert not checked.is_error, checked.content
            report = checked.structured_content
            _empty_and_unreadable(report["problems"])
            shown = report["samples"][0]
            assert "<|im_start|>user\nWhere is my order" in shown and "<|im_end|>" in shown
            assert "👍" in "".join(report["samples"]) and "👎" in "".join(report["samples"])
            assert report["loss"].startswith("KTO:")

            on_modal = {**SPEC, "compute": {"backend": "modal", "gpu": "H100"}}
            planned = await client.call_tool("plan", {"spec": on_modal})
            assert not planned.is_error, planned.content
            plan = planned.structured_content
            assert plan["spec"]["algorithm"]["kto"]["beta"] == 0.1  # TRL's default, said
            assert any(w.startswith("KTO trains on answers labelled") for w in plan["warnings"])
            assert plan["cost"]["step_s"] > 0 and plan["cost"]["worst_case_usd"] > 0
            assert "KTO is priced as 2.00x an SFT step" in plan["cost"]["basis"]

            # the rows the trainer cannot read are refused by name: the dry run runs on a
            # file without them, as the flags advise
            rows = [r for r in feedback_rows() if r["id"] != "t5"]
            lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            (project / "feedback.jsonl").write_text(lines)
            started = await client.call_tool("smoke_run", {"spec": SPEC})
            assert not started.is_error, started.content
            run_id = started.structured_content["run_id"]
            detail = await mcp_wait_finished(client, run_id, 400)
            assert detail["status"] == "succeeded", detail.get("cause")
            verbose = await client.call_tool("get_run", {"run_id": run_id, "verbose": True})
            run = verbose.structured_content
            assert any("KTO (LoRA" in line and "adapter off" in line
                       for line in run["dry_run"]["proved"])  # fmt: skip
            assert any("labels teach" in line for line in run["dry_run"]["cannot_prove"])
            steps = [m for m in run["metrics"] if m.get("phase") == "train"]
            assert steps and all("loss" in m for m in steps)

    asyncio.run(main())


def test_data_check_json_from_a_shell_is_one_document_with_the_flags(project):
    done = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "data", "check", "kto.json", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # piped: one JSON document, nothing else
    _empty_and_unreadable(report["problems"])
    assert report["train_rows"] + report["holdout_rows"] == 32
