"""cli/progress: what a command that waits writes, in a pipe and as JSON events."""

import json
import time

from posttrain.cli import progress as progress_module
from posttrain.cli.common import emit_json
from posttrain.cli.progress import Reporter, mode_for


def fast_heartbeat(monkeypatch):
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.3)
    monkeypatch.setattr(progress_module, "TICK_S", 0.05)


def test_a_pipe_gets_plain_lines_and_json_alone_gets_none():
    assert mode_for(as_json=False) == "lines"  # pytest's stdout is no terminal
    assert mode_for(as_json=True) == "quiet"
    assert mode_for(as_json=True, events=True) == "events"


def test_a_caller_that_blocks_is_still_heard_from_by_its_heartbeat(monkeypatch, capsys):
    fast_heartbeat(monkeypatch)
    with Reporter("lines").running() as reporter:
        reporter.update("eval", "evaluate", 1, 6, "base pass 1")
        time.sleep(1.0)  # an in-process evaluation that reports nothing for a while
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 3, lines  # the first line, then heartbeats every 0.3 s
    assert all(line.startswith("evaluate 1/6 base pass 1 (elapsed 0:0") for line in lines)


def test_changes_are_written_at_most_every_few_seconds_and_the_end_always(capsys):
    with Reporter("lines").running() as reporter:
        for step in range(1, 251):  # a fast trainer: 250 steps between two polls
            reporter.update("train", "GRPO", step, 250, f"reward {step / 250:.3f}")
        reporter.close("train")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (elapsed")[0] for line in lines] == [
        "GRPO 1/250 reward 0.004",
        "GRPO 250/250 reward 1.000",
    ]


def test_events_are_json_lines_that_end_with_the_result_object(monkeypatch, capsys):
    fast_heartbeat(monkeypatch)
    with Reporter("events").running() as reporter:
        reporter.note("demo run [bold]run-1[/bold]: started", run_id="run-1")
        reporter.update("train", "GRPO", 3, 10, "reward 0.5", reward=0.5)
        time.sleep(0.5)
        reporter.close("train")
    emit_json({"run_id": "run-1", "status": "succeeded"}, events=True)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0] == {"event": "note", "message": "demo run run-1: started", "run_id": "run-1"}
    progress = [e for e in events if e.get("event") == "progress"]
    assert len(progress) >= 2 and progress[0]["done"] == 3 and progress[0]["reward"] == 0.5
    assert events[-1] == {"run_id": "run-1", "status": "succeeded"}
