"""evaluate end to end on real tiny runs: one code path for both arms, stored with the run."""

import json
import shutil

import pytest

from posttrain.evals.evaluation import evaluate_run
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run
from tests.conftest import kill_leftover_runs, trained_run, wait_finished
from tests.specs import EVAL_RUN

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    with trained_run(tmp_path_factory, EVAL_RUN) as run:
        yield run


def test_when_the_trained_model_is_the_base_itself_the_verdict_is_not_improved(
    finished_run, monkeypatch
):
    home, run_id = finished_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    run_dir = home / "runs" / run_id
    shutil.rmtree(run_dir / "final")
    shutil.copytree(run_dir / "warmstart", run_dir / "final")  # "trained" = the base exactly
    outcome = evaluate(run_id, k=2, base_passes=3, max_tasks=60)
    result = outcome.result
    assert outcome.status == "done" and result.tasks_used >= 50
    reward = result.metrics[0]
    # same weights, same seed: the trained pass is base pass 1 again; the base is the mean of
    # its three passes, so the delta is pass 1's own chance distance from that mean
    assert reward.is_training_reward and reward.trained_mean == reward.base_pass_means[0]
    assert reward.delta == pytest.approx(
        reward.base_pass_means[0] - sum(reward.base_pass_means) / 3
    )
    assert reward.ci_low < 0 < reward.ci_high
    assert "improved" not in result.verdict
    assert result.verdict.startswith("unproven: within_noise")
    assert "the metric is the training reward itself" in result.verdict
    assert {m.name for m in result.metrics} >= {"reward", "relevance"}
    unoptimised = {m.name: m for m in result.unoptimised}
    assert set(unoptimised) == {"reference_nll", "length_words"}
    nll = unoptimised["reference_nll"]
    assert nll.delta == 0.0 and nll.base_mean > 0 and not nll.optimised  # same weights
    assert "within_noise" in nll.verdict and not nll.higher_is_better
    assert get_run(run_id).evaluation["verdict"] == result.verdict  # stored with the run


def test_a_degenerate_metric_is_reported_loudly_not_as_a_tight_interval(finished_run):
    home, run_id = finished_run
    empty = {"base": None, "trained": None}

    def generate(job):  # every answer empty: the reward scores 0 everywhere
        n, k = len(job["prompts"]), job["k"]
        empty["base"] = [[[""] * k for _ in range(n)] for _ in job["base_seeds"]]
        empty["trained"] = [[""] * k for _ in range(n)]
        return empty

    result = evaluate_run(home / "runs" / run_id, generate, k=2, max_tasks=20)
    assert result.verdict == "insufficient_data"
    assert any(w.startswith("DEGENERATE reward: every score is 0") for w in result.warnings)
    assert result.metrics[0].degenerate == "every score is 0"


def test_evaluate_tells_a_real_mcp_client_how_far_it_is_and_asks_the_judge_it_was_given(
    finished_run, monkeypatch
):
    import asyncio

    from mcp import Client

    from posttrain.server.app import build_server
    from tests.conftest import wait_for

    home, run_id = finished_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    seen: list[dict] = []

    async def call(tool: str, args: dict) -> dict:
        async with Client(build_server(), mode="legacy") as client:
            return (await client.call_tool(tool, args)).structured_content

    from tests.rewards.judge_server import serving

    judge = {"rubric": EVAL_RUBRIC, "model": "rule-judge"}
    with serving() as url:  # the judge reaches the detached job's own process
        judge["base_url"] = url
        args = {"run_id": run_id, "k": 1, "base_passes": 2, "max_tasks": 20, "judge": judge}
        started = asyncio.run(call("evaluate", args))
        assert started["status"] == "started", started

        def ended() -> dict | None:
            seen.append(asyncio.run(call("get_job", {"job_id": started["job_id"]})))
            return seen[-1] if seen[-1]["status"] != "running" else None

        done = wait_for(ended, timeout_s=300, every_s=1.0)
    assert done["status"] == "succeeded", done["error"]
    assert (done["done"], done["total"], done["stage"]) == (2, 2, "done")
    stages = {v["stage"] for v in seen if v["status"] == "running"} - {None}
    assert stages <= {
        f"generating for {run_id}",
        "scoring 1 run(s) with rhyme_relevance",
        "asking the judge",
    }
    unoptimised = done["result"]["result"]["unoptimised"]
    assert "eval_judge" in [m["name"] for m in unoptimised]


def trained_with(reward: str, home, **fields) -> str:
    """A finished tiny run of EVAL_RUN (no warm-start) with this reward: its id."""
    spec = {**EVAL_RUN, "reward": reward, **fields}
    spec["algorithm"] = {**EVAL_RUN["algorithm"], "warmstart": None}
    run_id = launch(spec).run_id
    try:
        assert wait_finished(run_id, 300).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    return run_id


def test_a_user_reward_scores_the_evaluation_in_a_child_never_in_the_caller(tmp_path, monkeypatch):
    """The user's reward file is their code: evaluate scores with it in an isolated child.
    The file records the process that imports it; the caller's pid must never appear."""
    import os

    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    pids = tmp_path / "pids.txt"
    (tmp_path / "mine.py").write_text(
        "import os\n"
        f"open({str(pids)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "def score(completions, **kw):\n"
        "    return [min(1.0, len(str(c)) / 80) for c in completions]\n"
    )
    run_id = trained_with("mine.py:score", tmp_path / "home")
    trainer_pids = set(pids.read_text().split())
    outcome = evaluate(run_id, k=1, base_passes=2, max_tasks=60)
    assert outcome.status == "done" and outcome.result.metrics[0].name == "reward"
    scoring_pids = set(pids.read_text().split()) - trainer_pids
    assert scoring_pids and str(os.getpid()) not in scoring_pids  # a child scored it


def passes_of(*values):
    """One pass's {"reward": [task][sample]} from one value per task."""
    return [{"reward": [[v] for v in one]} for one in values]


def test_the_pass_threshold_is_the_users_or_one_for_a_0_1_reward_never_a_median_of_zero():
    from posttrain.evals.pass_rates import pass_threshold
    from posttrain.rewards.registry import get_reward

    binary = passes_of([0.0, 0.0, 1.0, 0.0])
    mine = get_reward("mine.py:score", {})  # a file reward: no declared range
    assert pass_threshold(mine, binary, binary, None) == (1.0, "a 0/1 reward passes at 1")
    assert pass_threshold(mine, binary, binary, 0.3)[0] == 0.3  # the user's wins
    graded = passes_of([0.05, 0.0, 0.1, 0.0])
    threshold, why = pass_threshold(mine, graded, graded, None)
    assert threshold is None and "declares no range" in why and "--threshold" in why
    ranged = get_reward("mine.py:score", {"value_range": [0, 10]})
    assert pass_threshold(ranged, graded, graded, None)[0] == 5.0
    assert pass_threshold(get_reward("rhyme", {}), graded, graded, None)[0] == 0.5


def test_a_0_1_file_reward_reports_pass_at_k_at_one_and_the_spec_can_set_it(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "binary.py").write_text(
        "def score(completions, **kw):\n"
        "    return [1.0 if len(str(c).split()) >= 6 else 0.0 for c in completions]\n"
    )
    run_id = trained_with("binary.py:score", tmp_path / "home")
    outcome = evaluate(run_id, k=2, base_passes=2, max_tasks=30)
    assert outcome.result.pass_rates.threshold == 1.0
    second = trained_with("binary.py:score", tmp_path / "home", eval={"pass_threshold": 0.5})
    assert evaluate(second, k=2, base_passes=2, max_tasks=30).result.pass_rates.threshold == 0.5


EVAL_RUBRIC = "A second opinion: an answer scores 1 when it holds the reference poem, else 0."


def answering(base, trained):
    """generate(job) whose base passes answer base(i, reference) and whose trained pass
    answers trained(i, reference) for task i, every sample alike."""

    def generate(job):
        n, k, refs = len(job["prompts"]), job["k"], job["references"]
        return {
            "base": [[[base(i, refs[i])] * k for i in range(n)] for _ in job["base_seeds"]],
            "trained": [[trained(i, refs[i])] * k for i in range(n)],
        }

    return generate


def judge_params(url, **more):
    return {"rubric": EVAL_RUBRIC, "base_url": url, "model": "rule-judge", **more}


def test_a_judge_the_training_never_saw_is_reported_beside_the_training_reward(
    finished_run, tmp_path
):
    from tests.rewards.judge_server import serving

    home, run_id = finished_run
    log = tmp_path / "judge.jsonl"
    generate = answering(lambda i, ref: "no idea", lambda i, ref: ref)
    with serving(log) as url:
        judge = judge_params(url, reference_column="reference", cache=False)
        result = evaluate_run(home / "runs" / run_id, generate, k=2, max_tasks=30, judge=judge)
    seen = {m.name: m for m in result.unoptimised}
    second = seen["eval_judge"]
    assert result.metrics[0].name == "reward"  # the training reward stays the headline
    assert not second.optimised and second.higher_is_better
    assert (second.base_mean, second.trained_mean) == (0.0, 1.0)
    assert second.verdict.split(" (")[0] in ("improved", "unproven: improved")
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r["messages"][0]["content"] == EVAL_RUBRIC for r in requests)
    # single mode: one answer a request, for each task of every pass (3 base + 1 trained);
    # a task's k=2 samples are the same text here, asked once
    assert len(requests) == 30 * 4
    assert all(r["messages"][-1]["content"].count("<answer id=") == 1 for r in requests)
    first = result.examples[0]
    assert (first["base_judge"], first["trained_judge"]) == (0.0, 1.0)


def test_a_judge_that_finds_the_trained_answers_worse_qualifies_the_verdict(finished_run):
    from tests.rewards.judge_server import serving

    home, run_id = finished_run
    generate = answering(lambda i, ref: ref, lambda i, ref: "")
    with serving() as url:
        judge = judge_params(url, reference_column="reference", cache=False)
        result = evaluate_run(home / "runs" / run_id, generate, k=1, max_tasks=30, judge=judge)
    assert {m.name: m for m in result.unoptimised}["eval_judge"].delta == -1.0
    assert "eval_judge worse beyond noise" in result.verdict


def test_tasks_the_judge_could_not_grade_are_left_out_of_its_metric_and_said(finished_run):
    from tests.rewards.judge_server import serving

    home, run_id = finished_run
    generate = answering(lambda i, ref: "UNGRADABLE" if i < 4 else "no idea", lambda i, ref: ref)
    with serving() as url:
        judge = judge_params(url, reference_column="reference", cache=False, retries=0)
        result = evaluate_run(home / "runs" / run_id, generate, k=1, max_tasks=30, judge=judge)
    assert any("eval_judge: 4 of 30 tasks left out" in w for w in result.warnings)
    second = {m.name: m for m in result.unoptimised}["eval_judge"]
    assert (second.base_mean, second.trained_mean) == (0.0, 1.0)  # the 26 graded tasks
    assert result.metrics[0].name == "reward"  # the training reward keeps every task


def test_a_judge_that_is_down_fails_the_evaluation_by_its_address_before_any_model_runs(
    finished_run,
):
    from posttrain.core.errors import RewardError
    from tests.conftest import free_port

    home, run_id = finished_run
    calls = []
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RewardError, match=f"judge at {url}"):
        evaluate_run(
            home / "runs" / run_id,
            lambda job: calls.append(job),
            k=1,
            max_tasks=30,
            judge=judge_params(url, retries=0),
        )
    assert calls == []  # nothing generated for a judge that cannot answer


def test_evaluate_asks_a_judge_given_to_the_tool_and_never_a_group_judge(
    finished_run, monkeypatch, tmp_path
):
    from posttrain.core.errors import ConfigError
    from tests.rewards.judge_server import serving

    home, run_id = finished_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    rubric = tmp_path / "rubric.md"
    rubric.write_text(EVAL_RUBRIC, encoding="utf-8")
    with pytest.raises(ConfigError, match="mode must be 'single'"):
        evaluate(run_id, k=1, base_passes=2, max_tasks=20, judge={"mode": "group"})
    log = tmp_path / "judge.jsonl"
    with serving(log) as url:
        judge = {"rubric_file": str(rubric), "base_url": url, "model": "rule-judge"}
        outcome = evaluate(run_id, k=1, base_passes=2, max_tasks=20, judge=judge)
    assert outcome.status == "done"
    names = [m.name for m in outcome.result.unoptimised]
    assert names[:2] == ["reference_nll", "eval_judge"]
    # the real tiny model's answers, each judged against the rubric read from its file
    assert json.loads(log.read_text().splitlines()[0])["messages"][0]["content"] == EVAL_RUBRIC


def test_a_paid_judge_is_priced_and_asked_like_any_spend_before_it_is_called(
    finished_run, monkeypatch
):
    from posttrain.core.errors import RewardError

    home, run_id = finished_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    paid = {
        "rubric": EVAL_RUBRIC,
        "base_url": "https://judge.invalid/v1",  # never reached before the approval
        "model": "their-judge",
        "price_per_mtok": [5.0, 15.0],
        "retries": 0,
    }
    asked = evaluate(run_id, k=2, base_passes=2, max_tasks=30, judge=paid)
    assert asked.status == "needs_confirmation" and asked.confirmation_token
    # 30 tasks x 2 samples x 3 passes, each asked alone, twice at worst
    assert "up to 180 times" in asked.message and asked.worst_case_usd > 0
    assert "their-judge at https://judge.invalid/v1" in asked.message
    with pytest.raises(RewardError, match=r"judge at https://judge\.invalid/v1"):  # approved: asked
        evaluate(
            run_id,
            k=2,
            base_passes=2,
            max_tasks=30,
            judge=paid,
            confirmation_token=asked.confirmation_token,
        )
