"""An experiment as an agent drives it, over the real MCP client: plan prices every arm,
launch starts all its runs under one experiment id, list_runs shows their arms, and evaluate
of the experiment (a job, polled) returns the arms ranked with a verdict the statistics
support. Real tiny runs on the local backend."""

import asyncio

import pytest
from mcp import Client

from posttrain.server.app import build_server
from tests.conftest import kill_leftover_runs, wait_finished, wait_for
from tests.specs import EVAL_RUN

pytestmark = pytest.mark.slow

EXPERIMENT = {
    **EVAL_RUN,
    "algorithm": {**EVAL_RUN["algorithm"], "warmstart": None},
    "sweep": {"algorithm.learning_rate": [5e-4, 0.0], "seeds": [0, 1]},
}


def call(tool: str, args: dict) -> dict:
    async def go():
        async with Client(build_server(), mode="legacy") as client:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content[0].text
            return result.structured_content

    return asyncio.run(go())


def test_an_experiment_is_planned_launched_and_compared_over_mcp(home):
    planned = call("plan", {"spec": EXPERIMENT})
    arms = planned["experiment"]["arms"]
    assert [a["name"] for a in arms] == ["learning_rate=0.0005", "learning_rate=0"]
    assert planned["experiment"]["runs"] == 4 and "queue" in planned["experiment"]["parallel"]
    assert planned["cost"]["expected_s"] == pytest.approx(
        sum(a["cost"]["expected_s"] for a in arms)
    )

    started = call("launch", {"spec": EXPERIMENT})
    assert started["status"] == "started" and started["approved_by"] == "free"
    experiment, run_ids = started["group_id"], started["run_ids"]
    assert experiment.startswith("exp-") and len(run_ids) == 4
    try:
        for run_id in run_ids:
            assert wait_finished(run_id, 600).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    listed = {r["run_id"]: r for r in call("list_runs", {})["runs"]}
    assert [listed[r]["arm"] for r in run_ids] == [a["name"] for a in arms for _ in (0, 1)]
    assert {listed[r]["group_id"] for r in run_ids} == {experiment}

    job = call("evaluate", {"run_id": experiment, "k": 1, "base_passes": 2, "max_tasks": 20})
    assert job["status"] == "started", job

    def ended():
        seen = call("get_job", {"job_id": job["job_id"]})
        return seen if seen["status"] != "running" else None

    done = wait_for(ended, timeout_s=600, every_s=1.0)
    assert done["status"] == "succeeded", done["error"]
    compared = done["result"]["experiment"]
    ranked = compared["arms"]
    assert sorted(a["arm"] for a in ranked) == sorted(a["name"] for a in arms)
    assert [a["rank"] for a in ranked] == [1, 2] and ranked[0]["vs_best"] is None
    assert ranked[0]["mean"] >= ranked[1]["mean"]  # maximize: the best first
    behind = ranked[1]["vs_best"]
    assert set(behind) >= {"delta", "ci_low", "ci_high", "se", "df", "p_value", "beyond_noise"}
    # a winner is named only beyond noise; otherwise the verdict says the tie
    if compared["best"] is None:
        assert "tied_within_noise" in compared["verdict"] and not behind["beyond_noise"]
    else:
        assert behind["beyond_noise"] and compared["best"] == ranked[0]["arm"]
    # two seeds an arm: their spread is measured (pooled over the arms), no caveat of its own
    assert not any("seed" in c for c in compared["caveats"])
    assert all(len(a["runs"]) == 2 for a in ranked)
