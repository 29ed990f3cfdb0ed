import json
import threading
import time

import pytest

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.runs.context import Context
from posttrain.runs.layout import (
    EventWriter,
    check_run_id,
    read_events,
    write_json_atomic,
    write_rows_atomic,
)
from posttrain.runs.store import Store
from posttrain.tools.runs import get_run, sample_traces, tail_logs


def make_run(root, run_id="run-test-0001", steps=5, result=True):
    d = root / run_id
    write_json_atomic(
        d / "run.json", {"run_id": run_id, "backend": "local", "created_at": 1.0, "spec_id": "abc"}
    )
    (d / "spec.json").write_text(
        json.dumps({"model": {"name": "tiny-local"}, "algorithm": {"kind": "grpo", "steps": steps}})
    )
    w = EventWriter(d)
    w.write("stage", stage="training")
    for step in range(1, steps + 1):
        w.write("metrics", phase="train", step=step, reward=step / 10, components={"rhyme": 0.1})
        w.write("log", level="info", message=f"finished step {step} of the gradient descent")
    (d / "traces").mkdir()
    (d / "traces" / "step_0001.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": 1,
                    "idx": i,
                    "prompt": "p",
                    "completion": f"c{i}",
                    "reward": i / 4,
                    "components": {"rhyme": i},
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    w.write("trace", phase="train", step=1, path="traces/step_0001.jsonl", n=4)
    if result:
        w.write("result", status="succeeded", final={})
    w.close()
    return d


def test_ingestion_is_incremental_and_idempotent(tmp_path):
    root = tmp_path / "runs"
    d = make_run(root, result=False)
    store = Store(tmp_path / "index.sqlite", root=root)
    store.sync()
    assert store.get(d.name).status == "running" and store.get(d.name).step == 5
    store.sync()
    store.ingest(d)  # again: nothing doubles
    assert len(store.metrics(d.name)) == 5 and len(store.logs(d.name)) == 5
    w = EventWriter(d)
    w.write("result", status="succeeded", final={})
    w.close()
    store.sync()
    assert store.get(d.name).status == "succeeded"
    assert store.get(d.name).best_reward == 0.5


def test_a_torn_last_line_is_left_until_complete_then_skipped_and_reported(tmp_path):
    root = tmp_path / "runs"
    d = make_run(root, result=False)
    with (d / "events.jsonl").open("a") as f:
        f.write('{"t": 1, "type": "metrics", "phase": "train", "step": 6, "rew')  # killed here
    store = Store(tmp_path / "index.sqlite", root=root)
    store.sync()
    assert store.get(d.name).step == 5 and store.get(d.name).torn_lines == 0
    w = EventWriter(d)  # a new writer closes the torn line before appending
    w.write("result", status="failed", cause="trainer killed by SIGKILL", final={})
    w.close()
    store.sync()
    row = store.get(d.name)
    assert row.status == "failed" and row.torn_lines == 1
    assert any("skipped a torn event line" in line["message"] for line in store.logs(d.name))
    assert len(read_events(d / "events.jsonl", final=True).events) == 13


def test_a_deleted_index_is_rebuilt_with_nothing_lost(tmp_path, home):
    ctx = Context()
    d = make_run(ctx.root)
    before = get_run(d.name, verbose=True, ctx=ctx).model_dump()
    cursor = tail_logs(d.name, tail=2, ctx=ctx).cursor
    ctx.index.close()
    (home / "index.sqlite").unlink()
    ctx2 = Context()
    after = get_run(d.name, verbose=True, ctx=ctx2).model_dump()
    assert after["metrics"] == before["metrics"] and after["status"] == "succeeded"
    assert tail_logs(d.name, tail=2, ctx=ctx2).cursor == cursor  # cursors survive a rebuild


def test_log_search_and_cursor_paging(tmp_path, home):
    ctx = Context()
    d = make_run(ctx.root)
    found = tail_logs(d.name, search="step 3", ctx=ctx).lines
    assert [line.message for line in found] == ["finished step 3 of the gradient descent"]
    after = tail_logs(d.name, after=found[0].pos, ctx=ctx)
    assert [line.message[:15] for line in after.lines] == [
        "finished step 4",
        "finished step 5",
        "run succeeded",
    ]
    assert tail_logs(d.name, after=after.cursor, ctx=ctx).lines == []
    assert tail_logs(d.name, search='"-" OR :', ctx=ctx).lines == []  # odd input is literal


def test_traces_come_back_ordered_by_reward(tmp_path, home):
    ctx = Context()
    d = make_run(ctx.root)
    page = sample_traces(d.name, "first", n=2, order="worst", ctx=ctx)
    assert [r.completion for r in page.steps[1]] == ["c0", "c1"]
    with pytest.raises(NotFoundError, match="steps with traces: \\[1\\]"):
        sample_traces(d.name, "7", ctx=ctx)


def test_run_ids_are_validated_and_unknown_runs_are_not_found(home):
    with pytest.raises(ConfigError, match="not valid"):
        check_run_id("../../etc/passwd")
    with pytest.raises(NotFoundError, match="no run 'run-nope-0000'"):
        get_run("run-nope-0000")


def test_any_json_value_in_a_trace_is_indexed_and_no_run_breaks_the_listing(tmp_path, home):
    """A reference column of dicts (tool calls), lists and unicode: traces keep them as JSON
    text, and every run still lists (a dict used to stop the index, and so every listing)."""
    from posttrain.tools.runs import list_runs

    root = home / "runs"
    clean = make_run(root, "run-test-0001")
    odd = make_run(root, "run-test-0002")
    call = {"name": "get_weather", "arguments": {"city": "São Paulo", "days": [1, 2]}}
    references = [call, [call, call], "東京", 3.5]
    (odd / "traces" / "step_0001.jsonl").write_text(
        "".join(
            json.dumps(
                {"step": 1, "idx": i, "prompt": {"role": "user"}, "completion": ["a", "b"],
                 "reward": i / 4, "reference": ref, "trained": "⟦x⟧", "components": {}},
                ensure_ascii=False,
            ) + "\n"
            for i, ref in enumerate(references)
        ),
        encoding="utf-8",
    )  # fmt: skip
    ctx = Context()
    assert {r.run_id for r in list_runs(ctx=ctx)} == {clean.name, odd.name}
    page = sample_traces(odd.name, "first", n=4, order="best", ctx=ctx)
    got = {r.idx: r for r in page.steps[1]}
    assert json.loads(got[0].reference) == call and json.loads(got[1].reference) == [call, call]
    assert got[2].reference == "東京" and got[3].reference == "3.5"
    assert got[0].prompt == '{"role": "user"}' and got[0].trained == "⟦x⟧"
    assert get_run(odd.name, ctx=ctx).status == "succeeded"


def test_rows_are_whole_for_a_reader_that_copies_them_on_first_sight(tmp_path):
    """The Modal backend copies a run's held-out rows and each trace file once, when it first
    sees them; a half-written file copied then stayed half (an evaluation found 0 tasks)."""
    path = tmp_path / "holdout.jsonl"
    rows = [{"id": i, "prompt_text": f"question {i} " + "é" * 200} for i in range(20_000)]
    writer = threading.Thread(target=write_rows_atomic, args=(path, rows))
    seen_names: set[str] = set()
    writer.start()
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        seen_names.update(p.name for p in tmp_path.iterdir())
    copied = path.read_text(encoding="utf-8")  # the first sight
    writer.join()
    assert [json.loads(line) for line in copied.splitlines()] == rows
    assert all(name.startswith(".") for name in seen_names - {path.name})  # listings skip it
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no staging file left
