"""Malformed arguments to every tool get an error result that says what is wrong, and the
server keeps serving: a loop of bad calls, then a good one."""

import asyncio

import pytest
from mcp import Client

from posttrain.server.app import build_server

BAD_CALLS = [
    ("plan", {"spec": 42}, "spec"),
    ("plan", {"spec": "../../etc/passwd"}, "outside the allowed folders"),
    ("plan", {"spec": {"algorithm": {"steps": 10**12}}}, "algorithm.steps"),
    ("plan", {"spec": {"model": "Qwen9-1T"}}, "unknown model preset"),
    ("plan", {"spec": {"dataset": {"path": "../../etc/passwd"}}}, "outside the allowed folders"),
    # a path that does not exist is refused for being outside, not for being absent: the
    # server answers nothing about what exists outside its folders
    ("plan", {"spec": {"dataset": {"path": "/no/such/dir/x.jsonl"}}}, "outside the allowed"),
    ("plan", {"spec": {"model": "/no/such/model"}}, "outside the allowed folders"),
    ("plan", {"spec": {"model": "posttrain/../../../no/such"}}, "outside the allowed folders"),
    ("plan", {"spec": {"dataset": {"hf_repo": "/tmp"}}}, "outside the allowed folders"),
    ("check_dataset", {"spec": {"dataset": {"builtin": "nope"}}}, "dataset.builtin"),
    ("check_dataset", {}, "spec"),
    ("check_reward", {"reward": "rhyme", "data": "../../etc/passwd"}, "outside the allowed"),
    (
        "check_reward",
        {"reward": "no_such_reward", "data": "examples/rhyme_qa.jsonl"},
        "unknown reward",
    ),
    ("check_reward", {"reward": "rhyme", "rows": 10**9, "data": "examples/rhyme_qa.jsonl"}, "rows"),
    (
        "check_reward",
        {"reward": "../../etc/passwd:f", "data": "examples/rhyme_qa.jsonl"},
        "outside the allowed folders",
    ),
    (
        "check_reward",
        {"reward": "rewards/absent.py:f", "data": "examples/rhyme_qa.jsonl"},
        "does not exist",
    ),
    ("smoke_run", {"spec": {"model": "tiny-local"}, "steps": -3}, "steps"),
    ("smoke_run", {"spec": {"reward": {"name": "/etc/passwd:f"}}}, "outside the allowed"),
    ("launch", {"spec": "not json and not a file"}, "does not exist"),
    ("launch", {"spec": {"compute": {"gpu": "H900"}}}, "unknown GPU type"),
    ("list_runs", {"limit": 10**9}, "limit"),
    ("list_runs", {"status": "exploded"}, "status"),
    ("get_run", {"run_id": "../../etc/passwd"}, "not valid"),
    ("get_run", {"run_id": "run-000000-000000-dead"}, "no run"),
    ("get_run", {"run_id": 12345}, "run_id"),
    ("tail_logs", {"run_id": "run-000000-000000-dead", "tail": 10**9}, "tail"),
    ("tail_logs", {"run_id": "run-000000-000000-dead"}, "no run"),
    ("sample_traces", {"run_id": "../x", "steps": "first"}, "not valid"),
    ("sample_traces", {"run_id": "run-000000-000000-dead", "order": "sideways"}, "order"),
    ("evaluate", {"run_id": "run-000000-000000-dead"}, "no run"),
    ("evaluate", {"run_id": "run-000000-000000-dead", "k": 0}, "k"),
    ("cancel_run", {"run_id": "/etc/passwd"}, "not valid"),
    ("cancel_run", {}, "run_id"),
    ("no_such_tool", {}, "Unknown tool"),
]


def test_every_bad_call_gets_a_clear_error_and_the_server_keeps_serving(home):
    async def main():
        async with Client(build_server(), mode="legacy") as client:
            for tool, arguments, expected in BAD_CALLS:
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments, result.structured_content)
                text = result.content[0].text
                assert expected in text, (tool, arguments, text)
                assert "Traceback" not in text
            good = await client.call_tool("plan", {"spec": {"model": "tiny-local"}})
            assert not good.is_error and good.structured_content["spec_id"]

    asyncio.run(main())


def test_a_reward_file_outside_the_roots_is_refused_before_it_is_imported(home, tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\ndef f(completions, **kw):\n    return [1.0]\n"
    )
    spec = {"reward": {"name": f"{tmp_path / 'evil.py'}:f"}}

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            return [await client.call_tool(t, {"spec": spec}) for t in ("plan", "launch")]

    for result in asyncio.run(main()):
        assert result.is_error and "outside the allowed folders" in result.content[0].text
    assert not marker.exists(), "the file outside the roots was executed"


@pytest.mark.parametrize("mode", ("legacy", "2026-07-28"))
def test_an_unexpected_failure_is_an_error_result_not_a_dead_server(home, monkeypatch, mode):
    from posttrain.tools import plan as plan_module

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(plan_module, "estimate", explode)

    async def main():
        async with Client(build_server(), mode=mode) as client:
            broken = await client.call_tool("plan", {"spec": {}})
            assert (
                broken.is_error
                and "internal error (RuntimeError: disk on fire)" in broken.content[0].text
            )
            assert not (await client.call_tool("list_runs", {})).is_error

    asyncio.run(main())
