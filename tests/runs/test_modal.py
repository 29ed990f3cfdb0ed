"""The Modal backend: the real function bodies and the real orchestration, with the modal SDK
stood in by a thin double at its boundary (tests/modal_double.py). No network, no tokens."""

import json
import time
from pathlib import Path

import pytest

from posttrain.core.errors import BackendError, BudgetError
from posttrain.data import gym
from posttrain.gpu import modal_app
from posttrain.runs.layout import iter_events
from posttrain.runs.modal_backend import ModalBackend
from posttrain.tools.context import Context
from posttrain.tools.launch import launch
from posttrain.tools.runs import cancel_run, get_run, list_runs, pull_run, sample_traces
from tests import modal_double
from tests.conftest import wait_finished, wait_for

pytestmark = pytest.mark.slow

TINY = {
    "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "steps": 4,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 24,
        "save_every": 2,
        "traces": {"every": 2, "samples": 2},
    },
}
MODAL = {**TINY, "compute": {"backend": "modal", "gpu": "A10", "timeout_s": 600}}


@pytest.fixture
def volume(tmp_path, monkeypatch):
    """The folder playing the runs Volume, where the function bodies write."""
    root = tmp_path / "volume"
    root.mkdir()
    monkeypatch.setenv("POSTTRAIN_MODAL_RUNS_ROOT", str(root))
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "1")  # the A10 worst case is $0.18
    return root


def modal_ctx(volume: Path, **double) -> tuple[Context, object]:
    sdk = modal_double.sdk(volume, **double)
    return Context(backends={"modal": ModalBackend(sdk=sdk)}), sdk


def shape(run_dir: Path) -> dict:
    """What a run directory holds, without timestamps: files, stages, steps, checkpoints."""
    events = list(iter_events(run_dir))
    return {
        "files": sorted(str(p.relative_to(run_dir)) for p in (run_dir / "traces").iterdir()),
        "final": sorted(p.name for p in (run_dir / "final").iterdir()),
        "stages": [e["stage"] for e in events if e["type"] == "stage"],
        "steps": [e["step"] for e in events if e["type"] == "metrics"],
        "checkpoints": [e["path"] for e in events if e["type"] == "checkpoint"],
        "result": [e["status"] for e in events if e["type"] == "result"],
    }


def test_the_modal_function_body_produces_the_local_run_directory(volume, home):
    from posttrain.spec.schema import load_spec

    status = modal_app.train_run.local("run-modal-00001", load_spec(TINY).to_json())
    assert status == "succeeded"
    local_id = launch(TINY).run_id
    wait_finished(local_id, 180, Context())
    assert shape(volume / "run-modal-00001") == shape(home / "runs" / local_id)


def test_a_modal_run_is_spawned_followed_and_costed(volume, home, tmp_path):
    ctx, sdk = modal_ctx(volume)
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(json.dumps({k: r[k] for k in ("prompt", "reference")}) + "\n" for r in gym.rows(32))
    )
    spec = {**MODAL, "dataset": {"path": str(data), "system_prompt": "answer in rhyme"}}
    started = launch(spec, ctx=ctx)
    assert started.status == "started" and started.approved_by == "policy"
    [spawn] = sdk.Function.spawned
    assert spawn["options"] == {"gpu": "A10", "timeout": 600}
    run_id, remote_spec, gpu_count, run_json = spawn["args"]
    assert run_id == started.run_id and gpu_count == 1
    assert json.loads(run_json)["base"]["run_id"] is None  # the launch's plan reaches the GPU
    assert json.loads(remote_spec)["dataset"]["path"] == "inputs/qa.jsonl"
    assert (volume / run_id / "inputs" / "qa.jsonl").read_text() == data.read_text()
    meta = json.loads((home / "runs" / run_id / "run.json").read_text())
    assert meta["call_id"].startswith("fc-double-") and meta["usd_per_s"] == 0.000306

    detail = wait_finished(run_id, 180, ctx)
    assert detail.status == "succeeded", detail.cause
    assert detail.step == 4 and [m["step"] for m in get_run(run_id, True, ctx).metrics] == [
        1,
        2,
        3,
        4,
    ]
    assert set(sample_traces(run_id, "first,last", ctx=ctx).steps) == {1, 4}
    assert detail.cost_usd == pytest.approx(
        (detail.ended_at - meta["submitted_at"]) * 0.000306, abs=1e-3
    )
    pulled = pull_run(run_id, tmp_path / "adapter", ctx=ctx)
    assert any(f.endswith("model.safetensors") for f in pulled["files"])

    from transformers import AutoModelForCausalLM

    from posttrain.tools.export import export_run

    assert not (home / "runs" / run_id / "final").exists()  # it lives on the Volume
    exported = export_run(run_id, tmp_path / "model", ctx=ctx, roots=[tmp_path])
    assert "model.safetensors" in exported.files and "tokenizer_config.json" in exported.files
    assert AutoModelForCausalLM.from_pretrained(exported.out).config.model_type == "qwen3"


def test_runs_are_reconciled_from_their_call_ids_after_a_restart(volume, home):
    ctx, sdk = modal_ctx(volume)
    run_id = launch(MODAL, ctx=ctx).run_id
    sdk.FunctionCall.registry[
        json.loads((home / "runs" / run_id / "run.json").read_text())["call_id"]
    ].thread.join(180)
    ctx.index.close()
    (home / "index.sqlite").unlink()  # the server restarts with nothing but the directories
    fresh = Context(backends={"modal": ModalBackend(sdk=sdk)})
    assert [r.run_id for r in list_runs(ctx=fresh)] == [run_id]
    assert wait_finished(run_id, 30, fresh).status == "succeeded"


def test_cancel_terminates_the_containers_and_says_so(volume, home):
    ctx, sdk = modal_ctx(volume)
    long_spec = {**MODAL, "algorithm": {**MODAL["algorithm"], "steps": 400}}
    run_id = launch(long_spec, ctx=ctx).run_id
    call_id = json.loads((home / "runs" / run_id / "run.json").read_text())["call_id"]
    call = sdk.FunctionCall.registry[call_id]
    wait_for(
        lambda: any(e["type"] == "metrics" for e in iter_events(volume / run_id)), timeout_s=120
    )
    result = cancel_run(run_id, ctx=ctx)
    assert result.stopped and result.status == "cancelled"
    assert call.cancel_calls == [True]  # terminate_containers=True
    assert "Modal terminated the containers" in get_run(run_id, ctx=ctx).cause
    (volume / run_id / "cancel.request").write_text("stop the double's thread")
    call.thread.join(60)


def test_a_network_error_mid_poll_shows_unreachable_not_failed_and_recovers(volume, home):
    ctx, sdk = modal_ctx(volume)
    run_id = launch(MODAL, ctx=ctx).run_id
    call = sdk.FunctionCall.registry[
        json.loads((home / "runs" / run_id / "run.json").read_text())["call_id"]
    ]
    sdk.network.down = True
    call.thread.join(180)  # the run finishes on "Modal" while we cannot see it
    for _ in range(3):
        detail = get_run(run_id, ctx=ctx)
        assert detail.status in ("queued", "running") and "unreachable" in detail.unreachable
    sdk.network.down = False
    assert wait_finished(run_id, 30, ctx).status == "succeeded"
    assert get_run(run_id, ctx=ctx).unreachable is None


def test_clear_errors_at_once_when_modal_is_not_ready(volume, home, monkeypatch):
    for double, message in (
        ({"token": False}, "Modal is not configured: run `modal token new`"),
        ({"volume_exists": False}, "Volume 'posttrain-runs' is missing"),
    ):
        ctx, _ = modal_ctx(volume, **double)
        t = time.perf_counter()
        with pytest.raises(BackendError, match=message):
            launch(MODAL, ctx=ctx)
        assert time.perf_counter() - t < 5  # never a hang
    ctx, sdk = modal_ctx(volume)
    monkeypatch.setattr(sdk.Function, "deployed", False)
    with pytest.raises(BackendError, match="not deployed: run `posttrain modal deploy`"):
        launch(MODAL, ctx=ctx)


def test_the_real_sdk_without_a_token_fails_at_once(home, monkeypatch):
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    t = time.perf_counter()
    with pytest.raises(BackendError, match="Modal is not configured"):
        ModalBackend().check_configured()
    assert time.perf_counter() - t < 5


def test_call_outcomes_map_to_statuses(tmp_path, volume):
    import modal.exception as errors

    backend = ModalBackend(sdk=modal_double.sdk(volume))
    run_dir = tmp_path / "run-x-1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"call_id": "fc-stub"}))
    (run_dir / "spec.json").write_text(json.dumps({"compute": {"timeout_s": 600}}))

    class Stub:
        def __init__(self, outcome):
            self.outcome = outcome

        def get(self, timeout=None):
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome

    cases = [
        (TimeoutError(), None),
        (errors.FunctionTimeoutError("timeout"), ("failed", "timeout (600 s)")),
        (errors.InputCancellation("x"), ("cancelled", "cancelled")),
        (RuntimeError("CUDA out of memory"), ("failed", "RuntimeError: CUDA out of memory")),
        ("succeeded", ("succeeded", None)),
    ]
    for outcome, expected in cases:
        modal_double.FunctionCall.registry["fc-stub"] = Stub(outcome)
        got = backend.outcome(run_dir)
        if expected is None:
            assert got is None
        else:
            assert got[0] == expected[0] and (expected[1] is None or expected[1] in got[1])
    modal_double.FunctionCall.registry["fc-stub"] = Stub(errors.ConnectionError("down"))
    with pytest.raises(errors.ConnectionError):
        backend.outcome(run_dir)


def test_an_over_budget_modal_launch_is_refused_before_spawning(volume, home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MAX_RUN_USD", "0.05")
    ctx, sdk = modal_ctx(volume)
    with pytest.raises(BudgetError, match="per-run cap"):
        launch(MODAL, ctx=ctx)
    assert sdk.Function.spawned == []


def test_a_judges_key_reaches_the_modal_trainer_as_a_secret_by_name_never_by_value(
    volume, home, monkeypatch
):
    from posttrain.core.errors import ConfigError

    planted = "sk-planted-0451"
    monkeypatch.setenv("JUDGE_KEY", planted)
    judge = {
        "rubric": "Grade it.",
        "base_url": "https://judge.invalid/v1",
        "model": "their-judge",
        "api_key_env": "JUDGE_KEY",
        "price_per_mtok": [0.1, 0.2],
        "retries": 0,
    }
    with pytest.raises(ConfigError, match=r"params\.api_key_secret"):  # the key is not there
        launch({**MODAL, "reward": {"name": "judge", "params": judge}})
    here = {**judge, "base_url": "http://127.0.0.1:8011/v1"}
    with pytest.raises(ConfigError, match="this machine, which a trainer on Modal cannot"):
        launch({**MODAL, "reward": {"name": "judge", "params": here}})
    ctx, sdk = modal_ctx(volume)
    secret = {**judge, "api_key_secret": "my-judge-key"}
    started = launch({**MODAL, "reward": {"name": "judge", "params": secret}}, ctx=ctx)
    [spawn] = sdk.Function.spawned
    assert spawn["options"]["secrets"] == [modal_double.Secret("my-judge-key")]
    assert planted not in json.dumps(spawn["args"])
    detail = wait_finished(started.run_id, 120, ctx)  # the endpoint does not exist
    assert detail.status == "failed" and "judge at https://judge.invalid/v1" in detail.cause
    for folder in (volume / started.run_id, home / "runs" / started.run_id):
        for path in folder.rglob("*"):
            if path.is_file():
                assert planted not in path.read_text(errors="replace"), path


def test_evaluating_a_modal_run_is_approved_like_a_launch_and_runs_there(volume, home):
    from posttrain.tools.evaluate import evaluate

    ctx, sdk = modal_ctx(volume)
    spec = {**MODAL, "dataset": {**MODAL["dataset"], "n_rows": 200, "holdout_share": 0.3}}
    run_id = launch(spec, ctx=ctx).run_id
    assert wait_finished(run_id, 180, ctx).status == "succeeded"
    asked = evaluate(run_id, k=2, max_tasks=20, ctx=ctx)  # A10 for an hour: $1.10 > $1 policy
    assert asked.status == "needs_confirmation" and asked.worst_case_usd == pytest.approx(1.1)
    assert not any(s.get("remote") for s in sdk.Function.spawned)
    done = evaluate(run_id, k=2, max_tasks=20, confirmation_token=asked.confirmation_token, ctx=ctx)
    assert done.status == "done" and done.approved_by == "token"
    [remote] = [s for s in sdk.Function.spawned if s.get("remote")]
    assert remote["options"] == {"gpu": "A10", "timeout": 3600}
    assert done.result.tasks_used >= 5 and done.result.metrics[0].name == "reward"


RESTART = """
import sys
from posttrain.gpu import modal_app
modal_app.run_training(sys.argv[1], open(sys.argv[2]).read(), 1, open(sys.argv[3]).read())
"""
# The first container's reward takes 1 s a call, so the kill lands between checkpoints on any
# machine (a tiny step takes 0.1 s on a fast one: all six were saved before a 0.5 s poll).
FIRST_SLOW = """
import os, time

def score(completions, **columns):
    if os.environ.get("FIRST_CONTAINER"):
        time.sleep(1.0)
    return [len(str(c)) % 7 / 7 for c in completions]
"""


def test_a_restarted_modal_input_continues_from_its_own_checkpoint(volume, home, tmp_path):
    """Modal retries an input whose container died (preempted, OOM-killed): the retry finds
    the run's folder on the Volume and resumes from its last checkpoint, not from step 0."""
    import os
    import signal
    import subprocess
    import sys

    from posttrain.spec.schema import load_spec
    from posttrain.tools.resolve import resolve

    (tmp_path / "first_slow.py").write_text(FIRST_SLOW)
    spec = load_spec(
        {
            **TINY,
            "reward": f"{tmp_path / 'first_slow.py'}:score",
            "algorithm": {**TINY["algorithm"], "steps": 6, "save_every": 2},
        }
    )
    plan = resolve(spec, Context(), check_runnable=False)
    run_id = "run-restart-0001"
    (tmp_path / "spec.json").write_text(spec.to_json())
    (tmp_path / "run.json").write_text(json.dumps({"run_id": run_id, **plan.run_meta()}))
    (tmp_path / "attempt.py").write_text(RESTART)
    attempt_args = [str(tmp_path / "spec.json"), str(tmp_path / "run.json")]
    first = subprocess.Popen(
        [sys.executable, str(tmp_path / "attempt.py"), run_id, *attempt_args],
        env={**os.environ, "POSTTRAIN_MODAL_RUNS_ROOT": str(volume), "FIRST_CONTAINER": "1"},
    )
    run_dir = volume / run_id
    saved = run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json"  # written last
    wait_for(saved.exists, timeout_s=180, every_s=0.05)
    first.send_signal(signal.SIGKILL)  # the container is gone, mid-run
    first.wait()
    assert not any(e["type"] == "result" for e in iter_events(run_dir))

    status = modal_app.run_training(
        run_id, spec.to_json(), 1, (tmp_path / "run.json").read_text()
    )  # Modal's retry of the same input
    assert status == "succeeded"
    events = list(iter_events(run_dir))
    retry_start = max(i for i, e in enumerate(events) if e.get("stage") == "preparing")
    retried = [e["step"] for e in events[retry_start:] if e["type"] == "metrics"]
    assert retried and retried[0] in (3, 5) and retried[-1] == 6  # after a checkpoint, never 1
    assert any("resuming from" in e.get("message", "") for e in events[retry_start:])
    assert [e["status"] for e in events if e["type"] == "result"] == ["succeeded"]


def test_a_dpo_run_on_modal_trains_its_pairs_and_reports_the_margin(volume, home, tmp_path):
    """DPO through the Modal function body, on pairs of the gym's words: a rhyming verse
    chosen over one that does not rhyme."""
    import random

    ctx, _ = modal_ctx(volume)
    rng = random.Random(0)
    pairs = []
    for i, row in enumerate(gym.rows(24)):
        topics = gym.pick_topics(rng)
        pairs.append(
            {
                "id": f"pair{i}",
                "ask": row["prompt"],
                "rhymes": gym.verse(topics, rng, rhyming=True),
                "does_not": gym.verse(topics, rng, rhyming=False),
            }
        )
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    spec = {
        **MODAL,
        "reward": None,
        "dataset": {
            "path": str(data),
            "prompt_column": "ask",
            "chosen_column": "rhymes",
            "rejected_column": "does_not",
        },
        "algorithm": {**TINY["algorithm"], "kind": "dpo", "batch_size": 4},
    }
    started = launch(spec, ctx=ctx)
    detail = wait_finished(started.run_id, 180, ctx)
    assert detail.status == "succeeded", detail.cause
    metrics = get_run(started.run_id, True, ctx).metrics
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all({"margin", "preference_accuracy", "logp_chosen"} <= set(m) for m in metrics)
    summary = get_run(started.run_id, ctx=ctx).preference  # DPO's figures without verbose
    assert summary["steps"] == [1, 4] and summary["margin"]["last"] == pytest.approx(
        sum(m["margin"] for m in metrics) / 4, abs=1e-4
    )
    assert (volume / started.run_id / "final" / "model.safetensors").is_file()


def test_a_distillation_run_on_modal_loads_its_teacher_where_the_student_trains(volume, home):
    """The Modal function body with a teacher: the tiny model distils from itself (the same
    vocabulary, the same weights: a divergence of 0, but the teacher's load, its forward pass
    and the student's sampling all run where the GPU would be)."""
    ctx, _ = modal_ctx(volume)
    spec = {
        **MODAL,
        "reward": None,
        "algorithm": {**TINY["algorithm"], "kind": "distill", "teacher": "tiny-local"},
    }
    started = launch(spec, ctx=ctx)
    detail = wait_finished(started.run_id, 180, ctx)
    assert detail.status == "succeeded", detail.cause
    lines = [e.get("message", "") for e in iter_events(volume / started.run_id)]
    assert any(line.startswith("train distillation from teacher tiny-local") for line in lines)
    assert [m["step"] for m in get_run(started.run_id, True, ctx).metrics] == [1, 2, 3, 4]
