"""Lean agent results: on a 400-step run with traces at every step, every default tool result
stays under 40,000 characters; the system prompt and tool schemas every sample repeats are
sent once a page; and a result's text is a summary, not a copy of its structured content."""

import asyncio
import json
import time

import pytest
from mcp import Client

from posttrain.runs.layout import EVENTS, RUN_META, SPEC
from posttrain.server.app import build_server
from tests.specs import tiny

MODES = ("legacy", "2026-07-28")
STEPS, SAMPLES = 400, 8
RUN = "run-261202-000000-lean"
TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
        for i in range(12)
    ]
)
SYSTEM = (
    "<|im_start|>system\nYou are a careful assistant.\n\n# Tools\n<tools>\n"
    + TOOLS
    + ("\n</tools><|im_end|>\n")
)
LIMIT = 40_000


@pytest.fixture
def long_run(home):
    """A finished run written as the trainer writes one: 400 steps, traces at every step."""
    run_dir = home / "runs" / RUN
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / SPEC).write_text(json.dumps({**tiny(steps=STEPS), "model": {"name": "tiny-local"}}))
    t0 = time.time() - 3600
    (run_dir / RUN_META).write_text(
        json.dumps({"run_id": RUN, "backend": "local", "created_at": t0, "status": "submitted"})
    )
    events = [{"t": t0, "type": "stage", "stage": "training"}]
    for step in range(1, STEPS + 1):
        t = t0 + step
        events.append(
            {
                "t": t,
                "type": "metrics",
                "phase": "train",
                "step": step,
                "reward": step / STEPS,
                "step_time_s": 1.0,
                "completion_length": 100 - step * 0.2,
                "components": {"rhyme": 0.5},
            }
        )
        events.append({"t": t, "type": "log", "level": "info", "message": f"step {step} " * 20})
        rows = [
            {
                "step": step,
                "idx": i,
                "group": i // 4,
                "prompt": f"question {step}.{i} " * 10,
                "completion": f"answer {i} " * 60,
                "reward": i / SAMPLES,
                "components": {"rhyme": 0.5},
                "reference": "the reference answer " * 5,
                "rendered": SYSTEM + f"<|im_start|>user\nquestion {step}.{i}<|im_end|>\n",
            }
            for i in range(SAMPLES)
        ]
        path = f"traces/step_{step:04d}.jsonl"
        (run_dir / path).write_text("".join(json.dumps(r) + "\n" for r in rows))
        events.append({"t": t, "type": "trace", "step": step, "path": path, "n": SAMPLES})
    events.append({"t": t0 + STEPS + 1, "type": "result", "status": "succeeded"})
    (run_dir / EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    return run_dir


def default_calls() -> dict[str, dict]:
    return {
        "list_runs": {},
        "get_run": {"run_id": RUN},
        "tail_logs": {"run_id": RUN},
        "sample_traces": {"run_id": RUN},
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
    assert page["shared"]["rendered"].startswith(SYSTEM)  # the system prompt and tools, once
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
    assert f"run_id: {RUN}" in got.content[0].text and "status: succeeded" in got.content[0].text
    assert len(traces.content[0].text) < len(json.dumps(traces.structured_content)) / 10


def test_a_page_of_traces_too_big_for_one_page_says_how_to_get_the_rest(long_run):
    async def go():
        async with Client(build_server(), mode="legacy") as client:
            return await client.call_tool(
                "sample_traces", {"run_id": RUN, "steps": "1-400", "n": 8}
            )

    page = asyncio.run(go()).structured_content
    assert 0 < len(page["steps"]) < 20 and page["next_steps"]
    assert page["note"].endswith("call again with steps next_steps for more")
