"""A dry run of a user's spec whose reward is a judge behind a real OpenAI-compatible endpoint
(tests/rewards/judge_server.py, its own process): their arithmetic file and column names, a
Qwen3 preset on the stand-in, offline. The endpoint sees the rubric, the traces carry the
judge's scores and reasons, an identical completion costs nothing, and an endpoint that is
down fails the run by name before any step trains."""

import json
import time
from pathlib import Path

import pytest

from posttrain.runs.layout import iter_events
from posttrain.tools.launch import smoke_run
from posttrain.tools.runs import sample_traces
from tests.conftest import free_port, offline_in, wait_finished
from tests.rewards.judge_server import serving

pytestmark = pytest.mark.slow

RUBRIC = "Grade the sum: the correct final number scores 1, anything else 0. Ignore style."


@pytest.fixture(scope="module")
def project(tmp_path_factory, empty_hf_home):
    root = tmp_path_factory.mktemp("sums")
    rows = [
        {"qid": f"s{i}", "frage": f"What is {i} + {2 * i}?", "lösung": str(3 * i)}
        for i in range(1, 25)
    ]
    (root / "sums.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    with offline_in(root, tmp_path_factory, empty_hf_home):
        yield root


def judge_spec(project: Path, base_url: str) -> dict:
    return {
        "model": "Qwen3-0.6B",
        "dataset": {
            "path": str(project / "sums.jsonl"),
            "prompt_template": "{frage}",
            "reference_column": "lösung",
            "holdout_share": 0.2,
        },
        "reward": {
            "name": "judge",
            "params": {
                "rubric": RUBRIC,
                "base_url": base_url,
                "model": "rule-judge",
                "mode": "group",
                "reference_column": "lösung",
                "retries": 1,
            },
        },
        "algorithm": {"kind": "grpo", "steps": 50, "batch_size": 16, "num_generations": 4},
        "compute": {"backend": "modal", "gpu": "H100"},
    }


@pytest.fixture(scope="module")
def judged_run(project):
    log = project / "judge_requests.jsonl"
    with serving(log) as url:
        result = smoke_run(judge_spec(project, url))
        detail = wait_finished(result.run_id, 600)
    return detail, [json.loads(line) for line in log.read_text().splitlines()], result


def test_the_dry_run_succeeds_and_the_endpoint_saw_the_rubric(judged_run):
    detail, seen, _ = judged_run
    assert detail.status == "succeeded", detail.cause
    assert seen and all(r["messages"][0]["content"] == RUBRIC for r in seen)
    assert all("Reference answer:\n" in r["messages"][1]["content"] for r in seen)
    judge = detail.dry_run["judge"]
    assert judge["requests"] == len(seen)  # what the run says it cost is what the judge saw
    assert judge["judged"] >= 2 * 6 and judge["endpoint"].startswith("http://127.0.0.1")


def test_the_dry_run_says_before_it_starts_how_often_it_asks_the_judge(judged_run):
    _, seen, result = judged_run
    stated = int(result.dry_run.judge.split(" requests")[0])
    assert result.dry_run.judge in result.message and "free" in result.dry_run.judge
    assert 0 < len(seen) <= stated  # the bound holds (cache hits ask fewer)


def test_traces_hold_the_judges_scores_and_reasons(judged_run):
    detail, _, _ = judged_run
    page = sample_traces(detail.run_id, steps="1-6", n=8)
    rows = [row for step in page.steps.values() for row in step]
    assert rows and all("judge" in r.components for r in rows)
    assert all(r.reward == r.components["judge"] for r in rows)
    assert all(r.reason in ("right",) or r.reason.startswith("expected") for r in rows)


def test_a_second_identical_completion_hit_the_cache(judged_run):
    detail, seen, _ = judged_run
    judge = detail.dry_run["judge"]
    asked = [
        (r["messages"][1]["content"]) for r in seen
    ]  # every request the endpoint saw was a different one: repeats came from the cache
    assert len(asked) == len(set(asked))
    assert judge["cache_hits"] >= 1, judge


def test_with_the_endpoint_down_the_run_fails_by_name_before_a_step(project):
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.time()
    result = smoke_run(judge_spec(project, url))
    detail = wait_finished(result.run_id, 180)
    assert detail.status == "failed"
    assert f"judge at {url}" in detail.cause and "did not answer" in detail.cause
    events = list(iter_events(Path(detail.run_dir)))
    assert not [e for e in events if e["type"] in ("metrics", "proof_step", "checkpoint")]
    assert "loading_model" not in [e.get("stage") for e in events]  # failed before the model
    assert time.time() - started < 120
