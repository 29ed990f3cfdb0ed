"""Nothing that costs money starts without a human's yes; caps hold whatever was approved.

The paid backend is a double at this stage (tests/doubles.py); the approval flow, the
ledger, the tokens and the MCP elicitation are all real."""

import asyncio

import pytest
from mcp import Client
from mcp_types import ElicitResult

from posttrain.ledger import budget
from posttrain.runs.context import Context
from posttrain.server.app import build_server
from tests.doubles import PaidBackendDouble
from tests.specs import PAID

MODES = ("legacy", "2026-07-28")


@pytest.fixture
def paid(home):
    backend = PaidBackendDouble()
    ctx = Context(backends={"modal": backend})
    return ctx, backend


def answering(action, approve=True, asked=None):
    async def callback(context, params):
        if asked is not None:
            asked.append(params.message)
        return ElicitResult(
            action=action, content={"approve": approve} if action == "accept" else None
        )

    return callback


def call(ctx, arguments, *, mode="legacy", elicit=None, tool="launch"):
    async def main():
        async with Client(build_server(ctx), mode=mode, elicitation_callback=elicit) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_an_accepted_elicitation_starts_the_run(paid, mode):
    ctx, backend = paid
    asked = []
    result = call(ctx, {"spec": PAID}, mode=mode, elicit=answering("accept", asked=asked))
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "started"
    assert result.structured_content["approved_by"] == "human"
    assert backend.started == [result.structured_content["run_id"]]
    cost = result.structured_content["cost"]
    assert len(asked) == 1 and asked[0].startswith(
        f"Launch Qwen3-0.6B (grpo, 100 steps) on L40S for up to 60 min: {cost['summary']}?"
    )
    assert f"${cost['run_usd']:.2f} on 1x L40S" in asked[0] and "at most $2.52" in asked[0]
    assert (cost["timeout_note"] or "") in asked[0]  # what the timeout may do, said too
    assert asked[0].endswith(
        "Dry run: none has passed for this model, data, reward and algorithm; `smoke_run` "
        "locally first is free."
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("action", "approve"), [("decline", True), ("accept", False), ("cancel", True)]
)
def test_a_declined_elicitation_starts_nothing(paid, mode, action, approve):
    ctx, backend = paid
    result = call(ctx, {"spec": PAID}, mode=mode, elicit=answering(action, approve))
    assert result.structured_content["status"] == "declined"
    assert backend.started == []


def test_a_client_without_elicitation_gets_a_token_that_works_once(paid):
    ctx, backend = paid
    first = call(ctx, {"spec": PAID}).structured_content
    assert first["status"] == "needs_confirmation" and backend.started == []
    token = first["confirmation_token"]
    assert "at most $2.52" in first["message"]
    second = call(ctx, {"spec": PAID, "confirmation_token": token}).structured_content
    assert second["status"] == "started" and second["approved_by"] == "token"
    again = call(ctx, {"spec": PAID, "confirmation_token": token, "idempotency_key": "other"})
    assert again.is_error and "already used" in again.content[0].text
    assert len(backend.started) == 1


def test_a_token_expires(paid, monkeypatch):
    ctx, backend = paid
    monkeypatch.setattr(budget, "TOKEN_TTL_S", -1)
    token = call(ctx, {"spec": PAID}).structured_content["confirmation_token"]
    late = call(ctx, {"spec": PAID, "confirmation_token": token})
    assert late.is_error and "expired" in late.content[0].text
    assert backend.started == []


def test_a_token_is_void_for_a_changed_spec(paid):
    ctx, backend = paid
    token = call(ctx, {"spec": PAID}).structured_content["confirmation_token"]
    changed = {**PAID, "algorithm": {"steps": 200}}
    result = call(ctx, {"spec": changed, "confirmation_token": token})
    assert result.is_error and "different spec" in result.content[0].text
    assert backend.started == []


def test_the_hard_cap_refuses_even_an_approved_launch(paid, monkeypatch):
    ctx, backend = paid
    monkeypatch.setenv("POSTTRAIN_MAX_RUN_USD", "1")
    asked = []
    result = call(ctx, {"spec": PAID}, elicit=answering("accept", asked=asked))
    assert result.is_error and "exceeds the per-run cap $1.00" in result.content[0].text
    assert asked == [] and backend.started == []  # nobody is asked to approve the impossible


def test_the_daily_cap_counts_earlier_launches(paid, monkeypatch):
    ctx, backend = paid
    monkeypatch.setenv("POSTTRAIN_MAX_DAY_USD", "3")
    accept = answering("accept")
    assert (
        call(ctx, {"spec": PAID, "idempotency_key": "a"}, elicit=accept).structured_content[
            "status"
        ]
        == "started"
    )
    second = call(ctx, {"spec": PAID, "idempotency_key": "b"}, elicit=accept)
    assert second.is_error and "daily cap $3.00" in second.content[0].text
    assert len(backend.started) == 1


def test_a_repeated_launch_starts_one_run(paid):
    ctx, backend = paid
    accept = answering("accept")
    first = call(ctx, {"spec": PAID, "idempotency_key": "k1"}, elicit=accept).structured_content
    again = call(ctx, {"spec": PAID, "idempotency_key": "k1"}, elicit=accept).structured_content
    assert again["status"] == "existing" and again["run_id"] == first["run_id"]
    default_a = call(ctx, {"spec": PAID}, elicit=accept).structured_content
    default_b = call(ctx, {"spec": PAID}, elicit=accept).structured_content
    assert default_b["status"] == "existing" and default_b["run_id"] == default_a["run_id"]
    assert len(backend.started) == 2


def test_launches_under_the_auto_approve_amount_need_no_one(paid, monkeypatch):
    ctx, _ = paid
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "5")
    result = call(ctx, {"spec": PAID}).structured_content
    assert result["status"] == "started" and result["approved_by"] == "policy"


def test_local_runs_are_free_and_need_no_approval(paid):
    ctx, _ = paid
    from posttrain.tools.launch import human_question

    assert human_question({"dataset": {"builtin": "rhyme-gym"}}, ctx=ctx) is None


def test_two_launches_racing_for_the_budget_cannot_pass_the_daily_cap_together(home, monkeypatch):
    import threading

    monkeypatch.setenv("POSTTRAIN_MAX_DAY_USD", "4")  # room for one $2.52 run, not two
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "3")

    backend = PaidBackendDouble(delay_s=0.5)  # a slow submit, outside the ledger's lock
    outcomes = []

    def race(key):
        ctx = Context(backends={"modal": backend})
        from posttrain.tools.launch import launch

        try:
            outcomes.append(launch(PAID, idempotency_key=key, ctx=ctx).status)
        except Exception as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=race, args=(k,)) for k in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["BudgetError", "BudgetError", "started"]
    assert len(backend.started) == 1


def test_a_spec_file_edited_between_two_asks_is_priced_as_it_is_now(paid, tmp_path, monkeypatch):
    """The server keeps a call's plan for a few seconds (its approval and its body read one
    plan): a spec file edited since is another plan, priced and approved anew."""
    import json

    ctx, backend = paid
    monkeypatch.chdir(tmp_path)
    spec_file = tmp_path / "spec.json"

    def write(steps):
        spec_file.write_text(json.dumps({**PAID, "algorithm": {"steps": steps}}))

    async def main():
        async with Client(build_server(ctx), mode="legacy") as client:
            write(100)
            short = await client.call_tool("launch", {"spec": "spec.json"})
            write(1000)
            long = await client.call_tool("launch", {"spec": "spec.json"})
            return short.structured_content, long.structured_content

    short, long = asyncio.run(main())
    assert short["status"] == long["status"] == "needs_confirmation"
    assert long["cost"]["run_usd"] > 5 * short["cost"]["run_usd"]
    assert short["confirmation_token"] != long["confirmation_token"]
    assert backend.started == []
