"""Lean agent results: on a 400-step run with traces at every step, every default tool result
stays under 40,000 characters; the system prompt and tool schemas every sample repeats are
sent once a page; and a result's text is a summary, not a copy of its structured content."""

import asyncio
import json

import pytest
from mcp import Client

from posttrain.server.app import build_server
from tests.conftest import LONG_RUN, LONG_RUN_SYSTEM

MODES = ("legacy", "2026-07-28")
LIMIT = 40_000


def default_calls() -> dict[str, dict]:
    return {
        "list_runs": {},
        "get_run": {"run_id": LONG_RUN},
        "tail_logs": {"run_id": LONG_RUN},
        "sample_traces": {"run_id": LONG_RUN},
    }


@pytest.mark.parametrize("mode", MODES)
def test_every_default_result_on_a_400_step_traced_run_is_under_40k_characters(long_run, mode):
    async def go():
        async with Client(build_server(), mode=mode) as client:
            return {t: await client.call_tool(t, a) for t, a in default_calls().items()}

    results = asyncio.run(go())
    for tool, result in results.items():
        assert not result.is_error, (tool, result.content)
        text = sum(len(c.text) for c in result.content if c.type == "text")
        size = text + len(json.dumps(result.structured_content))
        assert size < LIMIT, f"{tool}: {size:,} characters"
    page = results["sample_traces"].structured_content
    assert page["shared"]["rendered"].startswith(
        LONG_RUN_SYSTEM
    )  # the system prompt and tools, once
    rows = [r for rows in page["steps"].values() for r in rows]
    assert rows and not any("# Tools" in r["rendered"] for r in rows)
    assert all(r["rendered"].startswith("question ") for r in rows)


@pytest.mark.parametrize("mode", MODES)
def test_a_result_text_is_a_summary_not_a_copy_of_its_structured_content(long_run, mode):
    async def go():
        async with Client(build_server(), mode=mode) as client:
            return [await client.call_tool(t, a) for t, a in default_calls().items()]

    results = asyncio.run(go())
    for result in results:
        text = result.content[0].text
        with pytest.raises(ValueError):
            json.loads(text)  # not the JSON again
        assert text.endswith("(the whole result is the structured content)")
    got, traces = results[1], results[3]  # get_run, sample_traces
    assert (
        f"run_id: {LONG_RUN}" in got.content[0].text and "status: succeeded" in got.content[0].text
    )
    assert len(traces.content[0].text) < len(json.dumps(traces.structured_content)) / 10


def test_a_page_of_traces_too_big_for_one_page_says_how_to_get_the_rest(long_run):
    async def go():
        async with Client(build_server(), mode="legacy") as client:
            return await client.call_tool(
                "sample_traces", {"run_id": LONG_RUN, "steps": "1-400", "n": 8}
            )

    page = asyncio.run(go()).structured_content
    assert 0 < len(page["steps"]) < 20 and page["next_steps"]
    assert page["note"].endswith("call again with steps next_steps for more")
