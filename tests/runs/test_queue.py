"""The local run limit: at most N trainers at once; the rest queue and start in order."""

import itertools

import pytest

from posttrain.runs.layout import iter_events
from posttrain.runs.queue import cpu_thread_env
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run
from tests.conftest import kill_leftover_runs, wait_for
from tests.specs import TINY_RUN

pytestmark = pytest.mark.slow

TINY = TINY_RUN


def span(home, run_id):
    events = list(iter_events(home / "runs" / run_id))
    start = next(e["t"] for e in events if e["type"] == "stage")
    end = next(e["t"] for e in events if e["type"] == "result")
    return start, end


def test_runs_beyond_the_limit_queue_and_start_in_order(home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "1")
    ids = [launch({**TINY, "algorithm": {**TINY["algorithm"], "seed": s}}).run_id for s in range(3)]
    try:
        queued = wait_for(lambda: get_run(ids[2]).status == "queued", timeout_s=30, every_s=0.1)
        assert queued
        for run_id in ids:
            wait_for(lambda r=run_id: get_run(r).status == "succeeded", timeout_s=300)
    finally:
        kill_leftover_runs(home)
    spans = [span(home, r) for r in ids]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.5  # one trainer at a time (0.5 s: the slot's hand-over)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)  # in the order launched
    waits = [
        e["message"]
        for r in ids[1:]
        for e in iter_events(home / "runs" / r)
        if e["type"] == "log" and e["message"].startswith("queued")
    ]
    assert len(waits) == 2


def test_two_slots_run_two_trainers_at_once(home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "2")
    ids = [
        launch({**TINY, "algorithm": {**TINY["algorithm"], "seed": s, "steps": 40}}).run_id
        for s in range(2)
    ]
    try:
        for run_id in ids:
            wait_for(lambda r=run_id: get_run(r).status == "succeeded", timeout_s=300)
    finally:
        kill_leftover_runs(home)
    (a_start, a_end), (b_start, b_end) = (span(home, r) for r in ids)
    assert b_start < a_end and a_start < b_end  # they overlapped


def test_a_trainer_gets_its_share_of_the_cores_unless_told(monkeypatch):
    monkeypatch.delenv("POSTTRAIN_CPU_THREADS")
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "1")
    assert cpu_thread_env() == {"OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": "8"}
    monkeypatch.setenv("POSTTRAIN_LOCAL_MAX_RUNS", "3")
    assert cpu_thread_env()["OMP_NUM_THREADS"] == "2"
    monkeypatch.setenv("POSTTRAIN_CPU_THREADS", "3")  # said outright: it wins
    assert cpu_thread_env() == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}
