"""evaluate end to end on real tiny runs: one code path for both arms, stored with the run."""

import shutil

import pytest

from posttrain.evals.evaluate import evaluate_run
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from posttrain.tools.runs import get_run
from tests.conftest import kill_leftover_runs, wait_finished

pytestmark = pytest.mark.slow

SHORT = {
    "dataset": {
        "builtin": "rhyme-gym",
        "n_rows": 600,
        "system_prompt": "answer in rhyme",
        "response_column": "response",
        "holdout_share": 0.2,
    },
    "reward": "rhyme_relevance",
    "algorithm": {
        "steps": 3,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 16,
        "num_generations": 4,
        "max_completion_length": 24,
        "save_every": 0,
        "traces": {"every": 0, "samples": 2},
        "warmstart": {"steps": 20, "learning_rate": 2e-3, "batch_size": 32},
    },
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        run_id = launch(SHORT).run_id
        detail = wait_finished(run_id, 300)
        assert detail.status == "succeeded", detail.cause
        yield home, run_id
        kill_leftover_runs(home)


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
    assert reward.is_training_reward and reward.delta == 0.0  # same weights, same seed
    assert "improved" not in result.verdict
    assert result.verdict.startswith("unproven: within_noise")
    assert "the metric is the training reward itself" in result.verdict
    assert {m.name for m in result.metrics} >= {"reward", "relevance", "length_words"}
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
