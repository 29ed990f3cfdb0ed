"""Every evaluation of a run is kept: two in the same second (or from two processes at once)
are two files, listed oldest first, and a new evaluation of a run evaluated before names the
earlier verdicts."""

import threading
import time

from posttrain.evals.evaluation import EvalResult
from posttrain.evals.history import evaluated_before, keep, latest, listed, store


def result(verdict: str, run_id: str = "run-test-0001", **more) -> EvalResult:
    fields = dict(
        run_id=run_id, created_at=time.time(), verdict=verdict, tasks_total=60, tasks_used=58,
        dropped_contaminated={}, k=4, base_passes=3, seeds={}, metrics=[],
    )  # fmt: skip
    return EvalResult(**{**fields, **more})


def test_two_evaluations_in_one_second_are_both_kept_and_listed_in_order(tmp_path):
    run = tmp_path / "run-test-0001"
    run.mkdir()
    first = store(run, result("within_noise"))
    second = store(run, result("improved"))
    assert first.path != second.path  # the second never overwrote the first
    files = sorted((run / "evaluations").glob("eval-*.json"))
    assert len(files) == 2 and not list((run / "evaluations").glob(".*"))  # no leftovers
    every = listed(run)
    assert [e["verdict"] for e in every] == ["within_noise", "improved"]
    assert every[0] == {
        "path": first.path, "created_at": first.created_at, "evaluated": "run-test-0001",
        "verdict": "within_noise", "tasks_used": 58,
    }  # fmt: skip
    assert latest(run)["verdict"] == "improved"
    events = (run / "events.jsonl").read_text().splitlines()
    assert sum('"evaluation"' in line for line in events) == 2


def test_many_writers_at_once_lose_no_evaluation(tmp_path):
    run = tmp_path / "run-test-0001"
    run.mkdir()
    threads = [threading.Thread(target=store, args=(run, result(f"v{i}"))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(e["verdict"] for e in listed(run)) == [f"v{i}" for i in range(8)]


def test_a_run_evaluated_before_is_told_so_with_each_earlier_verdict(tmp_path):
    runs = [tmp_path / "run-a", tmp_path / "run-b"]
    for run in runs:
        run.mkdir()
    assert evaluated_before(runs) is None
    for verdict in ("within_noise", "within_noise"):
        keep(runs, result(verdict, run_id="grp-x"))  # a group's: stored with each seed
    third = keep(runs, result("improved", run_id="grp-x"))
    assert third.warnings[0] == (
        "evaluated 2 times before: within_noise, within_noise: re-evaluating until it says "
        "improved is not evidence; report every evaluation (get_run lists them), not the best"
    )  # one per evaluation, not one per seed that keeps it
    assert [e["verdict"] for e in listed(runs[1])] == ["within_noise", "within_noise", "improved"]
