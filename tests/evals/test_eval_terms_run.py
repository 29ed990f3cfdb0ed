"""The acceptance of issue 52's "evaluate on the user's terms", as an agent walks it over MCP
with a real in-memory client: an SFT spec (no reward) with a held-out file of the user's own
and `eval.metrics: [tool_call]`, trained for real (TRL on the tiny model), is evaluated on
that file with that metric; evaluated again, it says so with the earlier verdict; get_run
lists both evaluations."""

import asyncio
import json

import pytest
from mcp import Client

from posttrain.data.demo_specs import TOOL_SYSTEM_PROMPT, tool_rows
from posttrain.server.app import build_server
from posttrain.tools.launch import launch
from tests.conftest import kill_leftover_runs, wait_finished, wait_for
from tests.specs import SMALL_FULL_RUN

pytestmark = pytest.mark.slow

ROWS = tool_rows(480)
TRAIN, HELD = ROWS[:160], ROWS[160:220]


def spec(home, held: str) -> dict:
    return {
        "model": "tiny-local",
        "dataset": {
            "path": str(home / "calls.jsonl"),
            "system_prompt": TOOL_SYSTEM_PROMPT,
            "response_column": "answer",
            "reference_column": "answer",
            "holdout_share": 0.05,
        },
        "algorithm": {"kind": "sft", **SMALL_FULL_RUN},
        "eval": {"path": held, "metrics": ["tool_call"]},
    }


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    """An SFT run of the tiny model on the user's tool-calling rows, trained for real, with
    their held-out file (one row of it seen in training) beside the data."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        mp.chdir(home)
        (home / "calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TRAIN))
        held = home / "held_out.jsonl"
        held.write_text("".join(json.dumps(r) + "\n" for r in [*HELD, TRAIN[0]]))
        run_id = launch(spec(home, str(held))).run_id
        try:
            assert wait_finished(run_id, 300).status == "succeeded"
            yield home, run_id
        finally:
            kill_leftover_runs(home)


async def call(client: Client, tool: str, args: dict) -> dict:
    answer = await client.call_tool(tool, args)
    assert not answer.is_error, answer.content
    return answer.structured_content


async def evaluated(client: Client, args: dict) -> dict:
    """evaluate over MCP, its detached job polled until it ends: the evaluation."""
    return (await evaluated_by(client, args))[1]


async def evaluated_by(client: Client, args: dict) -> tuple[str, dict]:
    """evaluate over MCP: the job that answered, and its evaluation once it ends."""
    started = await call(client, "evaluate", args)
    if started["status"] == "done":  # the same request's job had ended: its evaluation
        return started["job_id"], started["result"]
    assert started["status"] == "started", started

    def ended() -> dict | None:
        got = asyncio.run(_job(started["job_id"]))
        return got if got["status"] != "running" else None

    done = await asyncio.to_thread(wait_for, ended, 300, 1.0)
    assert done["status"] == "succeeded", done["error"]
    return started["job_id"], done["result"]["result"]


async def _job(job_id: str) -> dict:
    async with Client(build_server(), mode="legacy") as client:
        return await call(client, "get_job", {"job_id": job_id})


def test_an_sft_spec_is_evaluated_on_the_users_file_with_the_metric_it_names_over_mcp(
    sft_run, monkeypatch
):
    home, run_id = sft_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(home)

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            gone = await client.call_tool("plan", {"spec": spec(home, "nowhere.jsonl")})
            assert gone.is_error and "eval.path" in gone.content[0].text
            assert "'nowhere.jsonl' does not exist" in gone.content[0].text

            args = {"run_id": run_id, "k": 1, "base_passes": 2, "max_tasks": 60}
            first = await evaluated(client, args)
            # the same request is the same job (its stored result); another is a new evaluation
            second = await evaluated(client, {**args, "max_tasks": 59})
            return first, second, await call(client, "get_run", {"run_id": run_id})

    first, second, detail = asyncio.run(main())
    held = first["held_out"]
    assert held["source"] == "eval.path" and held["path"].endswith("held_out.jsonl")
    assert held["rows"] == 61 and held["dropped"]["same_id"] == 1
    assert first["tasks_used"] == held["clean"] <= 60
    prompts = {r["prompt"] for r in HELD}
    assert all(e["prompt"] in prompts for e in first["examples"])  # the user's tasks
    assert first["metrics"][0]["name"] == "reference_nll"  # what SFT optimised: the headline
    named = {m["name"]: m for m in first["unoptimised"]}["tool_call"]
    assert not named["optimised"] and named["base_pass_means"] and named["verdict"]
    # the tiny word-level model writes no tool call: the metric is 0 everywhere, said loudly
    assert any(w.startswith("DEGENERATE tool_call: every score is 0") for w in first["warnings"])

    assert second["warnings"][0].startswith(f"evaluated once before: {first['verdict']}: ")
    listed = detail["evaluations"]
    assert [e["verdict"] for e in listed] == [first["verdict"], second["verdict"]]
    assert [e["path"] for e in listed] == [first["path"], second["path"]]
    assert [e["tasks_used"] for e in listed] == [first["tasks_used"], second["tasks_used"]]
    assert detail["evaluation"]["verdict"] == second["verdict"]  # the latest


def test_the_same_request_after_the_held_out_file_changed_is_a_new_evaluation_of_the_new_file(
    sft_run, monkeypatch
):
    home, run_id = sft_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(home)
    held = home / "held_out.jsonl"
    kept = held.read_text()
    args = {"run_id": run_id, "k": 1, "base_passes": 2, "max_tasks": 58}

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            before = await evaluated_by(client, args)
            again = await evaluated_by(client, args)  # unchanged: the stored job answers
            held.write_text("".join(json.dumps(r) + "\n" for r in HELD[:50]))  # edited
            edited = await evaluated_by(client, args)
            return before, again, edited

    try:
        (job, first), (same_job, _), (new_job, second) = asyncio.run(main())
    finally:
        held.write_text(kept)
    assert same_job == job
    assert new_job != job
    assert (first["held_out"]["rows"], second["held_out"]["rows"]) == (61, 50)


def test_an_edited_held_out_file_is_another_spend_and_another_request(sft_run, monkeypatch):
    """On Modal an evaluation is approved by its spend: a token for the old file's is not
    one for the edited file's."""
    from posttrain.tools.evaluate import plan_evaluation

    home, run_id = sft_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(home)
    held = home / "held_out.jsonl"
    kept = held.read_text()
    before = plan_evaluation(run_id, k=1, base_passes=2, max_tasks=58)
    try:
        held.write_text(kept + json.dumps(HELD[0]) + "\n")
        after = plan_evaluation(run_id, k=1, base_passes=2, max_tasks=58)
    finally:
        held.write_text(kept)
    assert len(before.held_out_files) == len(after.held_out_files) == 1
    assert before.spend_id() != after.spend_id() and ":heldout:" in after.spend_id()
    assert before.request() != after.request()
