"""DPO and distillation as an agent drives them: over MCP, through the real server and the
real client. data check's pairs and flags, the refusals that name the fix, a DPO dry run
and its preference figures in get_run."""

import asyncio
import json

import pytest
from mcp import Client

from posttrain.server.app import build_server
from tests.conftest import kill_leftover_runs, mcp_wait_finished

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path, monkeypatch, empty_hf_home):
    home = tmp_path / "home"
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(empty_hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    rows = []
    for i in range(24):
        good = f"Sorry about order #{i}: it ships today."
        bad = f"Order #{i}? Not my problem." if i % 3 else good  # every third: identical
        rows.append({"ticket": f"Order #{i} is late.", "good": good, "bad": bad})
    (tmp_path / "support.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    yield tmp_path
    kill_leftover_runs(home)


SPEC = {
    "model": "Qwen3-0.6B",
    "dataset": {
        "path": "support.jsonl",
        "prompt_column": "ticket",
        "chosen_column": "good",
        "rejected_column": "bad",
    },
    "algorithm": {"kind": "dpo", "steps": 8, "batch_size": 4},
}


def test_an_agent_checks_dry_runs_and_reads_a_dpo_spec_over_mcp(project):
    async def main():
        async with Client(build_server()) as client:
            checked = await client.call_tool("check_dataset", {"spec": SPEC})
            assert not checked.is_error, checked.content
            report = checked.structured_content
            assert report["pairs"][0]["prompt"].startswith("<|im_start|>user\nOrder #")
            assert report["pairs"][0]["chosen"].endswith("it ships today.<|im_end|>\n")
            assert any(p.startswith("8 of 24 pairs have identical") for p in report["problems"])

            wrong = await client.call_tool(
                "plan", {"spec": {**SPEC, "algorithm": {"kind": "preference"}}}
            )
            assert wrong.is_error and "'dpo'" in wrong.content[0].text
            assert "'distill'" in wrong.content[0].text
            teacher = {"kind": "distill", "teacher": "SmolLM2-135M-Instruct"}
            refused = await client.call_tool("plan", {"spec": {**SPEC, "algorithm": teacher}})
            assert refused.is_error and "SmolLM2's 49,152-token" in refused.content[0].text

            smoke = await client.call_tool("smoke_run", {"spec": SPEC})
            assert not smoke.is_error, smoke.content
            run_id = smoke.structured_content["run_id"]
            got = await mcp_wait_finished(client, run_id, 300)
            assert got["status"] == "succeeded", got["cause"]
            assert got["kind"] == "dpo"
            assert set(got["preference"]) >= {"margin", "preference_accuracy", "logp_chosen"}

    asyncio.run(main())
