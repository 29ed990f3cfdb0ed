"""A run's starts on Modal share one window, and its Volume commits retry, wait for saves and
never die: posttrain.gpu.attempts and posttrain.gpu.committer, on a real run directory."""

import json
import threading
import time

import pytest

from posttrain.gpu.attempts import (
    MAX_STARTS,
    Deadline,
    LastStep,
    begin,
    finish_refused,
    stop_margin_s,
)
from posttrain.gpu.committer import MAX_SAVE_WAIT_S, Committer, saving
from posttrain.runs.layout import SAVING, TIMEOUT_REQUEST, iter_events, write_result


def test_every_restart_shares_the_window_the_first_start_opened(tmp_path):
    first = begin(tmp_path, 600, now=1000.0)
    assert (first.number, first.deadline, first.refused) == (1, 1600.0, None)
    again = begin(tmp_path, 600, now=1400.0)  # preempted, restarted: the same deadline
    assert (again.number, again.deadline, again.refused) == (2, 1600.0, None)
    late = begin(tmp_path, 600, now=1650.0)  # Modal's retry after the timeout
    assert late.refused and "past its compute.timeout_s (600 s)" in late.refused
    assert json.loads((tmp_path / "starts.json").read_text())["starts"] == [1000, 1400, 1650]


def test_a_crash_loop_stops_at_the_last_allowed_start_and_the_run_fails_saying_so(tmp_path):
    starts = [begin(tmp_path, 3600, now=1000.0 + i) for i in range(MAX_STARTS + 1)]
    assert [s.refused for s in starts[:MAX_STARTS]] == [None] * MAX_STARTS
    assert f"started {MAX_STARTS + 1} times" in starts[-1].refused
    assert finish_refused(tmp_path, starts[-1]) == "failed"
    [result] = [e for e in iter_events(tmp_path) if e["type"] == "result"]
    assert result["status"] == "failed" and "kept dying" in result["cause"]


def test_a_start_after_the_run_ended_keeps_the_result_it_had(tmp_path):
    write_result(tmp_path, "succeeded", None)
    begin(tmp_path, 600, now=0.0)
    late = begin(tmp_path, 600, now=700.0)
    assert finish_refused(tmp_path, late) == "succeeded"
    assert [e["status"] for e in iter_events(tmp_path) if e["type"] == "result"] == ["succeeded"]


def test_the_stop_margin_covers_two_of_the_last_steps_and_the_save(tmp_path):
    last = LastStep(tmp_path)
    assert stop_margin_s(last.seconds(), 3600) == 60.0  # nothing measured yet: the save alone
    with (tmp_path / "events.jsonl").open("a") as events:
        for step, seconds in ((1, 12.0), (2, 40.0)):
            events.write(json.dumps({"type": "metrics", "step": step, "step_time_s": seconds}))
            events.write("\n")
    assert last.seconds() == 40.0 and stop_margin_s(40.0, 3600) == 2 * 40 + 60
    with (tmp_path / "events.jsonl").open("a") as events:  # read from where it stopped
        events.write(json.dumps({"type": "heartbeat", "step": 2}) + "\n")
    assert last.seconds() == 40.0 and last.offset == (tmp_path / "events.jsonl").stat().st_size
    assert stop_margin_s(40.0, 100) == 50  # never more than half the window


def test_the_deadline_asks_the_trainer_to_stop_then_ends_a_run_that_did_not(tmp_path):
    now = time.time()
    start = begin(tmp_path, 2, now=now)
    ended = threading.Event()
    with Deadline(tmp_path, start, 2, ended.set):
        assert ended.wait(10)
    request = json.loads((tmp_path / TIMEOUT_REQUEST).read_text())
    assert request["timeout_s"] == 2 and request["at"] < start.deadline
    [result] = [e for e in iter_events(tmp_path) if e["type"] == "result"]
    assert "did not stop when asked" in result["cause"]


def test_a_deadline_left_in_time_neither_asks_nor_ends(tmp_path):
    start = begin(tmp_path, 60, now=time.time())
    ended = threading.Event()
    with Deadline(tmp_path, start, 60, ended.set):
        pass
    assert not ended.is_set() and not (tmp_path / TIMEOUT_REQUEST).exists()


def test_a_failing_commit_is_logged_and_retried_and_the_loop_goes_on(tmp_path):
    said: list[str] = []
    calls: list[float] = []

    def flaky() -> None:
        calls.append(time.time())
        if len(calls) <= 2:
            raise RuntimeError("Volume busy")

    committer = Committer(flaky, tmp_path, every_s=0.05, log=said.append)
    with committer:
        deadline = time.time() + 20
        while committer.commits < 2 and time.time() < deadline:
            time.sleep(0.05)
    assert committer.failures == 2 and committer.commits >= 2
    assert sum("Volume commit failed (RuntimeError: Volume busy)" in s for s in said) == 2


def test_a_commit_waits_while_a_checkpoint_is_being_written(tmp_path):
    committed_while_saving: list[bool] = []
    committer = Committer(
        lambda: committed_while_saving.append((tmp_path / SAVING).exists()), tmp_path, 0.02
    )
    with committer:
        for _ in range(3):
            with saving(tmp_path):
                time.sleep(0.3)
            time.sleep(0.1)
    assert committed_while_saving and not any(committed_while_saving)
    assert MAX_SAVE_WAIT_S >= 60  # a long save is waited for, within reason


def test_the_last_commit_is_retried_until_it_lands(tmp_path, monkeypatch):
    monkeypatch.setattr("posttrain.gpu.committer.RETRY_DELAYS_S", (0.01,))
    attempts: list[int] = []

    def twice_down() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("reset")

    assert Committer(twice_down, tmp_path, log=lambda _: None).final()
    assert len(attempts) == 3


@pytest.mark.slow
def test_a_real_trainer_marks_each_save_so_no_commit_lands_inside_one(tmp_path, monkeypatch):
    """The tiny model's GRPO with a checkpoint every step: a committer polling as fast as it
    can never commits while a checkpoint or final/ is written, and every checkpoint it saw was
    whole (trainer_state.json, written last, present)."""
    from posttrain.gpu.train import train
    from posttrain.spec.schema import load_spec
    from tests.specs import tiny

    run_dir = tmp_path / "run-saves-0001"
    run_dir.mkdir()
    spec = load_spec(tiny(steps=3, save_every=1))
    (run_dir / "spec.json").write_text(spec.to_json())
    seen: list[set[str]] = []

    def snapshot() -> None:  # what a commit would persist, now
        folders = (run_dir / "checkpoints").glob("checkpoint-*")
        seen.append({f.name for f in folders if not (f / "trainer_state.json").exists()})

    with Committer(snapshot, run_dir, every_s=0.01, log=lambda _: None):
        assert train(run_dir) == "succeeded"
    assert len(seen) > 10 and not any(seen), [s for s in seen if s]
    assert not (run_dir / SAVING).exists()
