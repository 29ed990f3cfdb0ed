"""check_environment end to end, as a user meets it: their environment file, their data and
spec, through a real MCP client in memory and the real CLI in a subprocess. The
environment's code runs only in the isolated child, never in the server."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from mcp import Client

from posttrain.server.app import build_server
from tests.envfiles import BROKEN, HOSTILE, write_project


def _check(arguments: dict) -> tuple:
    """check_environment through the MCP server, then a second call that proves the server
    still serves: (the check's result, the second call's result)."""

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            result = await client.call_tool("check_environment", arguments)
            alive = await client.call_tool("plan", {"spec": {"model": "tiny-local"}})
            return result, alive

    return asyncio.run(main())


@pytest.fixture
def project(tmp_path, monkeypatch, home):
    monkeypatch.chdir(tmp_path)  # the user's project folder: an allowed root
    return tmp_path


def test_a_users_environment_passes_with_a_readable_report_and_is_never_imported_here(project):
    write_project(project)
    result, alive = _check({"environment": "spec.yaml"})
    assert not result.is_error, result.content[0].text
    report = result.structured_content
    assert report["passed"] and report["flagged"] == []
    assert [t["name"] for t in report["tools"]] == ["check_stock", "reserve"]
    episodes = {e["scenario"]: e for e in report["episodes"]}
    assert episodes["demo"]["total"] == 1.0 and episodes["demo"]["successful_calls"] == 2
    assert episodes["no_call"]["total"] == 0.0  # answering in prose earns nothing
    assert episodes["same_call_forever"]["stopped_at_turn_bound"]
    assert (
        "Tool no_such_tool not found." in episodes["unknown_tool"]["turns"][0]["calls"][0]["error"]
    )
    assert "no tool runs" in episodes["malformed_json"]["turns"][0]["note"]
    huge = [c for t in episodes["huge_argument"]["turns"] for c in t["calls"]]
    assert any(c["cut"] and c["result_chars"] > 4000 for c in huge)
    # the tools through Qwen3's real template: schemas in the system turn, the calls and results
    assert "<tools>" in report["rendered"] and '"name": "reserve"' in report["rendered"]
    assert "<tool_response>\n5 in stock\n</tool_response>" in report["rendered"]
    assert "(Order on file: 3 x widget.)" in report["rendered"]  # reset()'s text, appended
    assert not alive.is_error
    assert not any(m.startswith("posttrain_user_env") for m in sys.modules)


def test_a_tool_that_raises_and_a_reward_that_pays_without_a_call_are_flagged(project):
    write_project(project, BROKEN)
    result, alive = _check({"environment": "spec.yaml"})
    assert not result.is_error, result.content[0].text
    report = result.structured_content
    assert not report["passed"]
    flagged = "\n".join(report["flagged"])
    assert "tool 'check_stock' raised on a well-typed call (KeyError" in flagged
    assert "no_call: the reward pays 1 for an episode without a successful tool call" in flagged
    assert not alive.is_error


def test_an_environment_that_sleeps_floods_stdout_and_exits_never_stops_the_check(project):
    (project / "envs").mkdir()
    (project / "envs" / "hostile.py").write_text(HOSTILE)
    spec = {
        "model": "Qwen3-0.6B",
        "dataset": {"path": "orders.jsonl"},
        "environment": {"name": "envs/hostile.py:Hostile", "max_turns": 3, "tool_timeout_s": 1},
    }
    (project / "orders.jsonl").write_text(json.dumps({"prompt": "Order 3 widgets."}) + "\n")
    result, alive = _check({"environment": spec})
    assert not result.is_error, result.content[0].text
    report = result.structured_content
    episodes = {e["scenario"]: e for e in report["episodes"]}
    flagged = "\n".join(report["flagged"])
    assert "tool 'a_wait' did not return within 1 s (stopped): it hangs" in flagged
    assert "exited with code 3" in episodes["every_tool"]["crashed"]  # os._exit(3)
    assert "every_tool: environment 'envs/hostile.py:Hostile'" in flagged
    # the check went on in a fresh child after the crash
    assert {"malformed_json", "unknown_tool", "same_call_forever"} <= set(episodes)
    assert not alive.is_error


def test_an_environment_file_outside_the_roots_is_refused_before_it_is_imported(project, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    marker = outside / "imported"
    (outside / "env.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nclass E:\n    def reset(self, **r): pass\n"
    )
    result, alive = _check({"environment": f"{outside / 'env.py'}:E"})
    assert result.is_error and "outside the allowed folders" in result.content[0].text
    assert not marker.exists() and not alive.is_error


def test_the_cli_checks_a_users_spec_and_prints_a_report_a_person_can_read(project):
    write_project(project)
    env = {**os.environ, "COLUMNS": "120"}
    out = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "env", "check", "spec.yaml"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=project,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "envs/warehouse.py:Warehouse: 2 tools" in text
    assert "check_stock: Look up how many units of an item are in stock." in text
    for scenario in ("no_call", "demo", "malformed_json", "same_call_forever", "huge_argument"):
        assert scenario in text
    assert "One episode as the model sees it" in text and "<tool_call>" in text
    assert "No flag: the environment is ready to train in." in text


SLEEPS_AT_IMPORT = '''
import time

time.sleep(600)  # a module that hangs at import (a network call with no timeout, say)


class Stalled:
    def reset(self, **row):
        return ""

    def ping(self) -> str:
        """Answer pong."""
        return "pong"
'''


def test_an_environment_whose_import_hangs_is_said_within_the_load_limit_naming_the_file(
    project, monkeypatch
):
    """Loading gets the reward limit on its own, not the budget of every scripted episode:
    the check answers within it, over MCP and from the CLI, naming the file and the setting."""
    import time

    (project / "stalled.py").write_text(SLEEPS_AT_IMPORT)
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "3")  # the default is 60 s
    started = time.monotonic()
    result, alive = _check({"environment": "stalled.py:Stalled"})
    assert result.is_error and not alive.is_error
    said = result.content[0].text
    assert "stalled.py:Stalled" in said and "did not finish loading" in said
    assert "within 3 s" in said and "POSTTRAIN_REWARD_TIMEOUT_S (60 s by default)" in said
    assert time.monotonic() - started < 30  # 3 s to load, and the child's start

    started = time.monotonic()
    cli = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "env", "check", "stalled.py:Stalled", "--json"],
        capture_output=True, text=True, cwd=project, timeout=90,
    )  # fmt: skip
    assert cli.returncode != 0 and "stalled.py:Stalled" in json.loads(cli.stderr)["error"]
    assert time.monotonic() - started < 30


def test_the_load_limit_the_error_names_is_the_default_one(monkeypatch):
    from posttrain.rewards.isolated import DEFAULT_TIMEOUT_S, LOAD_SETTING, reward_timeout_s

    monkeypatch.delenv("POSTTRAIN_REWARD_TIMEOUT_S", raising=False)
    assert reward_timeout_s() == DEFAULT_TIMEOUT_S == 60.0
    assert LOAD_SETTING == "POSTTRAIN_REWARD_TIMEOUT_S (60 s by default)"
