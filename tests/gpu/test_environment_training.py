"""Training in an environment: the bounds hold in the trainer's proxy, the dry run of a user's
environment spec trains multi-turn GRPO on the Qwen3 stand-in (real TRL, real tokenizer) and
its traces hold whole episodes rendered through Qwen's template, and evaluate plays held-out
episodes and reports success, pass@k and pass^k."""

import json
import threading
import time

import pytest

from posttrain.environments.bounded import ToolFailed, bounded_class, tool_schemas
from posttrain.environments.episode import Bounds
from posttrain.environments.loader import load
from posttrain.environments.transcript import transcript
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import smoke_run
from posttrain.tools.runs import sample_traces
from tests.conftest import offline_in, wait_finished
from tests.envfiles import HOSTILE, WAREHOUSE, write_project

ITEMS = ["widget", "gizmo", "sprocket"]


def test_the_proxy_offers_the_users_tools_and_holds_time_size_and_error_bounds(tmp_path):
    (tmp_path / "warehouse.py").write_text(WAREHOUSE)
    (tmp_path / "hostile.py").write_text(HOSTILE)
    loaded = load(f"{tmp_path / 'warehouse.py'}:Warehouse", None)
    rows = [{"prompt": "p", "item": "widget", "quantity": 3}]
    env = bounded_class(loaded, Bounds(4, 1.0, 20), rows)()
    _, raw_tools = loaded.new()
    from transformers.utils import get_json_schema

    assert tool_schemas(env) == [get_json_schema(raw_tools[n]) for n in sorted(raw_tools)]
    assert type(env).__name__ == "Warehouse"  # TRL logs the environment under its class name
    assert env.reset(row=0) == "\n(Order on file: 3 x"  # the row by its index, cut to 20
    assert env.reserve(item="widget", quantity=3) == "reserved 3 widget"
    assert env._episode_reward() == (1.0, None)
    with pytest.raises(ToolFailed, match="TypeError"):  # TRL shows the model {"error": ...}
        env.reserve(item="widget")
    assert [c.ok for c in env._episode.calls] == [True, False]

    hostile = bounded_class(load(f"{tmp_path / 'hostile.py'}:Hostile", None), Bounds(2, 0.5, 50))()
    hostile.reset()
    seen: list[str] = []

    def from_a_worker_thread():  # TRL may call tools off the main thread: no SIGALRM there
        try:
            hostile.a_wait()
        except ToolFailed as exc:
            seen.append(str(exc))

    start = time.monotonic()
    with pytest.raises(ToolFailed, match=r"did not return within 0\.5 s \(stopped\)"):
        hostile.a_wait()
    worker = threading.Thread(target=from_a_worker_thread)
    worker.start()
    worker.join(10)
    assert seen == ["did not return within 0.5 s (abandoned)"]
    assert time.monotonic() - start < 5


def test_a_transcript_reads_both_call_shapes_and_counts_failed_calls():
    read = transcript(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "check_stock", "arguments": {"item": "widget"}}],
            },
            {"role": "tool", "name": "check_stock", "content": "5 in stock"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "reserve", "arguments": json.dumps({"item": "x"})},
                    }
                ],
            },
            {"role": "tool", "name": "reserve", "content": "{'error': 'TypeError: quantity'}"},
            {"role": "assistant", "content": "Reserved."},
        ]
    )
    calls = [c for t in read["turns"] for c in t["calls"]]
    assert [(c["name"], c["arguments"], c["ok"]) for c in calls] == [
        ("check_stock", {"item": "widget"}, True),
        ("reserve", {"item": "x"}, False),
    ]
    assert (read["final"], read["tool_calls"], read["tool_errors"], read["turn_count"]) == (
        "Reserved.",
        2,
        1,
        3,
    )


@pytest.fixture(scope="module")
def environment_dry_run(tmp_path_factory, empty_hf_home):
    """A user's warehouse environment and 24 orders, a Qwen3-0.6B spec, dry-run offline."""
    project = tmp_path_factory.mktemp("project")
    spec_path = write_project(project)
    with (project / "orders.jsonl").open("w") as f:
        for i in range(24):
            item, quantity = ITEMS[i % 3], 1 + i
            demo = [
                {"name": "check_stock", "arguments": {"item": item}},
                {"name": "reserve", "arguments": {"item": item, "quantity": quantity}},
            ]
            row = {"prompt": f"Reserve {quantity} {item}s for order {i}.", "item": item}
            f.write(json.dumps({**row, "quantity": quantity, "demo": demo}) + "\n")
    spec = spec_path.read_text().replace(
        "{path: orders.jsonl}", "{path: orders.jsonl, holdout_share: 0.5}"
    )
    spec_path.write_text(spec)
    with offline_in(project, tmp_path_factory, empty_hf_home):
        result = smoke_run(str(spec_path), steps=2)
        yield result, wait_finished(result.run_id, 600)


@pytest.mark.slow
def test_a_dry_run_in_a_users_environment_trains_and_shows_whole_episodes(environment_dry_run):
    result, detail = environment_dry_run
    assert detail.status == "succeeded", detail.cause
    report = detail.dry_run
    assert any(
        f.startswith("a scripted episode (the row's demonstration: 2 call(s), 0 failed)")
        for f in report["proved"]
    )
    assert any("rarely writes a well-formed <tool_call>" in c for c in report["cannot_prove"])

    scripted = sample_traces(result.run_id, steps="first", phase="scripted")
    (trace,) = scripted.steps[0]
    rendered = scripted.shared.get("rendered", "") + (trace.rendered or "")
    assert trace.reward == 1.0 and trace.components["environment"] == 1.0
    calls = [c for t in trace.episode["turns"] for c in t["calls"]]
    assert [(c["name"], c["ok"]) for c in calls] == [("check_stock", True), ("reserve", True)]
    # Qwen3's real template: tools in the system turn, calls, results as tool responses
    for piece in ('"name": "check_stock"', "<tool_call>", "<tool_response>", "in stock"):
        assert piece in rendered
    assert rendered.count("<|im_start|>assistant") == 3

    trained = sample_traces(result.run_id, steps="first,last")
    episodes = [r.episode for rows in trained.steps.values() for r in rows]
    assert episodes and all(e is not None and e["turn_count"] >= 1 for e in episodes)
    assert all(
        {"environment", "tool_calls", "turns"} <= set(r.components)
        for rows in trained.steps.values()
        for r in rows
    )


@pytest.mark.slow
def test_evaluate_plays_held_out_episodes_and_reports_pass_hat_k(environment_dry_run):
    result, detail = environment_dry_run
    assert detail.status == "succeeded", detail.cause
    outcome = evaluate(result.run_id, k=2, base_passes=2, max_tasks=5)
    got = outcome.result
    assert got is not None and got.tasks_used == 5
    assert [m.name for m in got.metrics] == ["reward", "success"]
    assert [m.name for m in got.unoptimised] == ["tool_errors", "turns", "tool_calls"]
    assert got.pass_rates is not None and got.pass_rates.threshold == 1.0
    assert set(got.pass_rates.trained) == {"pass@1", "pass@2", "pass^2"}
    assert all(m.base_mean >= 0 for m in got.unoptimised)  # counts per episode
    assert got.examples and all(isinstance(e["base"], str) for e in got.examples)
