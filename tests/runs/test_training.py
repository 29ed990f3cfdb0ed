"""Real training on the tiny model through the local backend, read back through the tools."""

import json
from pathlib import Path

import pytest

from posttrain.tools.launch import launch
from posttrain.tools.runs import cancel_run, get_run, list_runs, sample_traces, tail_logs
from tests.conftest import kill_leftover_runs, training_args, wait_finished, wait_for

pytestmark = pytest.mark.slow

GYM = {
    "builtin": "rhyme-gym",
    "n_rows": 200,
    "system_prompt": "answer in rhyme",
    "response_column": "response",
}
GRPO = {
    "dataset": GYM,
    "algorithm": {
        "kind": "grpo",
        "steps": 6,
        "learning_rate": 5e-4,
        "lora": {"r": 8},
        "batch_size": 16,
        "num_generations": 4,
        "max_completion_length": 24,
        "save_every": 3,
        "traces": {"every": 2, "samples": 4},
    },
}
SFT = {
    "dataset": GYM,
    "reward": "rhyme_relevance",  # an SFT spec names the reward its traces are scored with
    "algorithm": {
        "kind": "sft",
        "steps": 6,
        "learning_rate": 2e-3,
        "lora": {"r": 8},
        "batch_size": 16,
        "max_completion_length": 24,
        "save_every": 0,
        "traces": {"every": 3, "samples": 3},
    },
}
LONG = {
    **GRPO,
    "algorithm": {
        **GRPO["algorithm"],
        "steps": 500,
        "save_every": 0,
        "traces": {"every": 0, "samples": 2},
    },
}


@pytest.fixture(scope="module")
def module_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        yield home
        kill_leftover_runs(home)


@pytest.fixture(scope="module")
def runs(module_home):
    """A GRPO and an SFT run, trained side by side, both finished."""
    ids = {"grpo": launch(GRPO).run_id, "sft": launch(SFT).run_id}
    for run_id in ids.values():
        wait_finished(run_id, 300)
    return ids


def test_a_grpo_run_trains_and_everything_reads_back(runs):
    d = get_run(runs["grpo"], verbose=True)
    assert d.status == "succeeded", d.cause
    assert d.step == d.total_steps == 6 and d.stage == "succeeded"
    assert [m["step"] for m in d.metrics] == [1, 2, 3, 4, 5, 6]
    for m in d.metrics:
        assert {
            "reward",
            "reward_std",
            "loss",
            "kl",
            "completion_length",
            "step_time_s",
            "tokens_per_s",
        } <= set(m)
        assert {"rhyme", "relevance", "gate"} <= set(m["components"])
    assert d.trend.first_mean is not None and d.best_reward >= d.reward - 1e-9
    assert [c["path"] for c in d.checkpoints] == [
        "checkpoints/checkpoint-3",
        "checkpoints/checkpoint-6",
        "final",
    ]
    assert (Path(d.run_dir) / "final" / "adapter_config.json").is_file()  # LoRA adapter
    # A real run on the CPU keeps its activations (no recomputed forward pass), LoRA too.
    checkpoint = Path(d.run_dir) / "checkpoints" / "checkpoint-3"
    assert not training_args(checkpoint).gradient_checkpointing

    messages = [line.message for line in tail_logs(runs["grpo"], tail=200).lines]
    for stage in ("preparing", "loading_model", "proof_step", "training", "saving"):
        assert f"stage: {stage}" in messages
    assert messages[-1] == "run succeeded"

    page = sample_traces(runs["grpo"], "first,last", n=4, order="best")
    assert page.available_steps == [1, 2, 4, 6]
    rows = page.steps[1]
    assert len(rows) == 4 and rows[0].reward >= rows[-1].reward
    stored = [
        json.loads(line)
        for line in (Path(d.run_dir) / "traces" / "step_0001.jsonl").read_text().splitlines()
    ]
    assert {r.completion for r in rows} <= {r["completion"] for r in stored}
    assert all(r.prompt.startswith("write a poem about") and r.reference for r in rows)


def test_an_sft_run_trains_and_keeps_sampled_traces(runs):
    d = get_run(runs["sft"], verbose=True)
    assert d.status == "succeeded", d.cause
    assert len(d.metrics) == 6 and d.metrics[-1]["loss"] < d.metrics[0]["loss"]
    assert all("token_accuracy" in m for m in d.metrics)
    page = sample_traces(runs["sft"], "first,last", n=3)
    assert page.available_steps == [1, 3, 6]
    assert all(r.completion is not None and "rhyme" in r.components for r in page.steps[6])
    assert (Path(d.run_dir) / "holdout.jsonl").is_file()


def test_listing_shows_both_runs(runs):
    listed = {r.run_id: r for r in list_runs()}
    assert set(runs.values()) <= set(listed)
    assert listed[runs["sft"]].kind == "sft" and listed[runs["grpo"]].kind == "grpo"


def started_training(run_id: str, min_step: int = 2):
    detail = get_run(run_id)
    return detail if detail.phase == "train" and detail.step >= min_step else None


# A trainer killed by SIGKILL: tests/test_faults.py, at random moments of its writes.


def test_a_cancelled_run_stops_after_its_step_and_saves(module_home):
    run_id = launch(LONG).run_id
    wait_for(lambda: started_training(run_id), timeout_s=120)
    result = cancel_run(run_id)
    assert result.stopped and "killed" not in result.how
    d = get_run(run_id)
    assert d.status == "cancelled" and "cancelled by request after step" in d.cause
    assert d.step < 500
    assert (module_home / "runs" / run_id / "final" / "adapter_config.json").is_file()
