"""The Modal backend against the real modal SDK, pointed at a fake Modal control plane
(tests/modal_fake): posttrain's app deployed there by the SDK's own deploy, its functions run
in containers (subprocesses) that mount per-container views of the Volume and commit them with
the SDK's own `Volume.commit`. What the SDK raises and returns is the SDK's. No network, no
token of a real account."""

import json
import time
from pathlib import Path

import pytest

from posttrain.core.errors import BackendError, BudgetError
from posttrain.data import gym
from posttrain.gpu import modal_app
from posttrain.runs.context import Context
from posttrain.runs.layout import iter_events
from posttrain.runs.modal_backend import ModalBackend
from posttrain.tools.launch import launch
from posttrain.tools.runs import cancel_run, get_run, list_runs, pull_run, sample_traces
from tests.conftest import wait_finished, wait_for
from tests.specs import tiny

pytestmark = pytest.mark.slow

TINY = tiny(steps=4, max_completion_length=24, save_every=2, traces={"every": 2, "samples": 2})
MODAL = {**TINY, "compute": {"backend": "modal", "gpu": "A10", "timeout_s": 600}}


@pytest.fixture
def policy(monkeypatch):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "1")  # the A10's worst case is ~$0.30


@pytest.fixture
def volume(tmp_path, monkeypatch):
    """A folder playing the Volume for the function body run in this process (`.local`)."""
    root = tmp_path / "volume"
    root.mkdir()
    monkeypatch.setenv("POSTTRAIN_MODAL_RUNS_ROOT", str(root))
    return root


def runs_volume(fake) -> Path:
    """The runs Volume as its readers see it: what containers committed."""
    return fake.volume_path(modal_app.RUNS_VOLUME)


def call_of(home: Path, run_id: str) -> str:
    return json.loads((home / "runs" / run_id / "run.json").read_text())["call_id"]


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

    status = modal_app.train_run.local("run-modal-00001", load_spec(MODAL).to_json())
    assert status == "succeeded"
    local_id = launch(TINY).run_id
    wait_finished(local_id, 180, Context())
    assert shape(volume / "run-modal-00001") == shape(home / "runs" / local_id)


def test_a_modal_run_is_spawned_followed_and_costed(modal_fake, home, policy, tmp_path):
    from posttrain.tools.plan import plan

    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(json.dumps({k: r[k] for k in ("prompt", "reference")}) + "\n" for r in gym.rows(32))
    )
    spec = {**MODAL, "dataset": {"path": str(data), "system_prompt": "answer in rhyme"}}
    priced = plan(spec).cost
    started = launch(spec, ctx=Context())
    assert started.status == "started" and started.approved_by == "policy"
    call = modal_fake.calls[call_of(home, started.run_id)]
    run_id, remote_spec, gpu_count, run_json = call.args
    assert run_id == started.run_id and gpu_count == 1
    assert json.loads(run_json)["base"]["run_id"] is None  # the launch's plan reaches the GPU
    assert json.loads(remote_spec)["dataset"]["path"] == "inputs/qa.jsonl"
    assert (runs_volume(modal_fake) / run_id / "inputs" / "qa.jsonl").read_text() == (
        data.read_text()
    )
    # the container asked for what the plan priced: the GPU, its cores and memory, request and
    # limit alike, and a timeout past the run's own deadline
    resources = call.definition.resources
    assert (resources.gpu_config.gpu_type, resources.gpu_config.count) == ("A10", 1)
    assert resources.milli_cpu == resources.milli_cpu_max == int(priced.cpu_cores * 1000)
    assert resources.memory_mb == resources.memory_mb_max == priced.memory_gib * 1024
    assert call.definition.timeout_secs == 600 + 90
    meta = json.loads((home / "runs" / run_id / "run.json").read_text())
    assert meta["container_usd_per_s"] == pytest.approx(priced.container_usd_per_s)

    detail = wait_finished(run_id, 240, Context())
    assert detail.status == "succeeded", detail.cause
    assert detail.step == 4
    assert [m["step"] for m in get_run(run_id, True).metrics] == [1, 2, 3, 4]
    assert set(sample_traces(run_id, "first,last").steps) == {1, 4}
    assert detail.cost_usd == pytest.approx(  # the result, then the container's end after it
        (detail.ended_at + 30 - meta["submitted_at"]) * meta["container_usd_per_s"], abs=1e-3
    )
    # what the platform billed (every container second at its GPU, cores and memory) is within
    # what was shown, and far within what was approved
    billed = modal_fake.billed_usd(call.call_id)
    assert 0 < billed <= detail.cost_usd + 1e-4 and billed <= priced.worst_case_usd
    pulled = pull_run(run_id, tmp_path / "adapter")
    assert any(f.endswith("model.safetensors") for f in pulled["files"])

    from transformers import AutoModelForCausalLM

    from posttrain.tools.export import export_run

    assert not (home / "runs" / run_id / "final").exists()  # it lives on the Volume
    exported = export_run(run_id, tmp_path / "model", ctx=Context(), roots=[tmp_path])
    assert "model.safetensors" in exported.files and "tokenizer_config.json" in exported.files
    assert AutoModelForCausalLM.from_pretrained(exported.out).config.model_type == "qwen3"


HELPERS = """
import re

def last_number(text):
    found = re.findall(r"-?\\d+", str(text))
    return int(found[-1]) if found else None
"""
ARITHMETIC = """
from helpers import last_number

def exact(completions, solution, **columns):
    return [float(last_number(c) == int(s)) for c, s in zip(completions, solution)]
"""


def test_a_users_arithmetic_file_and_reward_with_its_own_module_train_on_modal(
    modal_fake, home, policy, tmp_path
):
    """As a user writes it: their file, their column names, a reward file that imports a
    module beside it. All of it reaches the container's Volume view, and the reward scores
    there with its helper."""
    work = tmp_path / "my project"
    work.mkdir()
    (work / "helpers.py").write_text(HELPERS)
    (work / "arith.py").write_text(ARITHMETIC)
    rows = [
        {"question": f"What is {a} + {b}? Answer with the number.", "solution": str(a + b)}
        for a in range(1, 9)
        for b in range(2, 6)
    ]
    (work / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        **MODAL,
        "dataset": {
            "path": str(work / "sums.jsonl"),
            "prompt_column": "question",
            "reference_column": "solution",
        },
        "reward": {"name": f"{work / 'arith.py'}:exact"},
    }
    started = launch(spec)
    detail = wait_finished(started.run_id, 240)
    assert detail.status == "succeeded", detail.cause
    inputs = runs_volume(modal_fake) / started.run_id / "inputs"
    uploaded = sorted(  # (the container's own __pycache__ from importing them aside)
        str(p.relative_to(inputs))
        for p in inputs.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert uploaded == ["reward/arith.py", "reward/helpers.py", "sums.jsonl"]
    call = modal_fake.calls[call_of(home, started.run_id)]
    remote = json.loads(call.args[1])
    assert remote["reward"]["name"] == "inputs/reward/arith.py:exact"
    assert str(tmp_path) not in call.args[1]  # nothing local reaches the container's spec
    metrics = get_run(started.run_id, True).metrics
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all(0.0 <= m["reward"] <= 1.0 for m in metrics)  # scored there, by its helper


def test_a_run_before_its_first_commit_reads_as_starting_and_a_cancel_then_is_recorded(
    modal_fake, home, policy
):
    """Queued for a GPU, the Volume holds nothing of the run: the SDK says FileNotFoundError
    for its events, which is not the network. Cancelling it then records the cancellation."""
    modal_fake.gpus_free.clear()
    run_id = launch(MODAL).run_id
    for _ in range(3):
        detail = get_run(run_id)
        assert detail.status == "queued" and detail.unreachable is None, detail.unreachable
        assert detail.stage.startswith("starting on Modal"), detail.stage
    assert not (runs_volume(modal_fake) / run_id / "events.jsonl").exists()
    result = cancel_run(run_id)
    assert result.stopped and result.status == "cancelled"
    assert "Modal terminated the containers" in get_run(run_id).cause
    call_id = call_of(home, run_id)
    cancels = [r for name, r in modal_fake.requests if name == "FunctionCallCancel"]
    assert [(r.function_call_id, r.terminate_containers) for r in cancels] == [(call_id, True)]
    modal_fake.gpus_free.set()
    assert modal_fake.wait(call_id, 30) and modal_fake.calls[call_id].attempts[-1].how in (
        "terminated",
    )


def test_a_crash_before_the_first_commit_fails_the_run_with_its_own_error_and_stops_its_cost(
    modal_fake, home, policy, tmp_path
):
    """The container cannot write its run directory (a mount that is not there): the body
    raises an OSError before anything is committed. The run ends failed with that error as
    soon as Modal has given up on it, never 'unreachable', and its cost stops there."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the Volume's mount should be")
    modal_fake.container_env = {"POSTTRAIN_MODAL_RUNS_ROOT": str(blocked)}
    run_id = launch(MODAL).run_id
    call_id = call_of(home, run_id)
    assert modal_fake.wait(call_id, 120)  # raised, retried twice (the function's retries)
    assert [a.how for a in modal_fake.calls[call_id].attempts] == ["raised"] * 3
    detail = get_run(run_id)  # one poll
    assert detail.status == "failed" and detail.unreachable is None
    assert detail.cause.startswith("the Modal function failed: NotADirectoryError"), detail.cause
    cost = detail.cost_usd
    time.sleep(1.5)
    assert get_run(run_id).cost_usd == cost  # ended: no longer growing


def test_runs_are_reconciled_from_their_call_ids_after_a_restart(modal_fake, home, policy):
    ctx = Context()
    run_id = launch(MODAL, ctx=ctx).run_id
    assert modal_fake.wait(call_of(home, run_id), 240)
    ctx.index.close()
    (home / "index.sqlite").unlink()  # the server restarts with nothing but the directories
    fresh = Context()
    assert [r.run_id for r in list_runs(ctx=fresh)] == [run_id]
    assert wait_finished(run_id, 30, fresh).status == "succeeded"


def test_a_poll_reads_trace_files_for_its_time_budget_and_the_index_loses_none(
    modal_fake, home, policy, monkeypatch
):
    """A run traced every step leaves a trace file per step on the Volume, one read each. A
    poll reads them for at most its budget (here 0 s: one file) and mirrors the events only up
    to the first trace it has not read, so a poll answers however far behind it is, and the
    index never meets a trace event before its file. The run's end reads the rest."""
    from posttrain.runs import modal_backend

    monkeypatch.setattr(modal_backend, "TRACE_READS_S", 0.0)
    monkeypatch.setattr(modal_backend, "TRACE_READERS", 1)
    traced = {**MODAL["algorithm"], "steps": 6, "traces": {"every": 1, "samples": 2}}
    run_id = launch({**MODAL, "algorithm": traced}).run_id
    assert modal_fake.wait(call_of(home, run_id), 240)  # ended on the Volume, not yet read here
    run_dir, backend, ctx = home / "runs" / run_id, ModalBackend(home / "runs"), Context()
    for polls in range(1, 4):
        assert backend.sync(run_dir, force=False)
        backend._last_sync.clear()  # the next poll, without waiting its interval
        assert sorted(p.name for p in (run_dir / "traces").iterdir()) == [
            f"step_{s:04d}.jsonl" for s in range(1, polls + 1)
        ]
        events = list(iter_events(run_dir))
        assert [e["step"] for e in events if e["type"] == "trace"] == list(range(1, polls + 1))
        ctx.index.ingest(run_dir)
        assert {t["step"] for t in ctx.index.traces(run_id)} == set(range(1, polls + 1))
    detail = wait_finished(run_id, 60, ctx)  # the call has ended: its last poll reads it all
    assert detail.status == "succeeded" and detail.step == 6
    assert {t["step"] for t in ctx.index.traces(run_id)} == set(range(1, 7))
    assert len(ctx.index.traces(run_id)) == 12  # 2 samples a step, none lost on the way


def test_cancel_terminates_the_containers_and_says_so(modal_fake, home, policy):
    long_spec = {**MODAL, "algorithm": {**MODAL["algorithm"], "steps": 400}}
    run_id = launch(long_spec).run_id
    wait_for(lambda: get_run(run_id).step >= 1, timeout_s=180)
    result = cancel_run(run_id)
    assert result.stopped and result.status == "cancelled"
    assert "Modal terminated the containers" in get_run(run_id).cause
    call_id = call_of(home, run_id)
    assert modal_fake.wait(call_id, 30)
    assert modal_fake.calls[call_id].attempts[-1].how == "terminated"


def test_a_network_error_mid_poll_shows_unreachable_not_failed_and_recovers(
    modal_fake, home, policy
):
    run_id = launch(MODAL).run_id
    wait_for(lambda: get_run(run_id).status == "running", timeout_s=180)
    modal_fake.network(False)  # connections refused: the SDK retries, then ConnectionError
    try:
        for _ in range(2):
            detail = get_run(run_id)
            assert detail.status in ("queued", "running") and "unreachable" in detail.unreachable
            time.sleep(5.5)  # past the backend's sync interval: it asks Modal again
    finally:
        modal_fake.network(True)
    assert wait_finished(run_id, 240).status == "succeeded"
    assert get_run(run_id).unreachable is None


def test_clear_errors_at_once_when_modal_is_not_ready(modal_fake, home, policy, monkeypatch):
    def refused(message: str) -> None:
        t = time.perf_counter()
        with pytest.raises(BackendError, match=message):
            launch(MODAL, ctx=Context())
        assert time.perf_counter() - t < 10  # never a hang

    deployed = modal_fake.snapshot()
    modal_fake.apps["posttrain"]["tags"]["posttrain"] = "0123456789abcdef"  # an older deploy
    refused(r"carries other code than this posttrain .*Run `posttrain modal deploy`")
    modal_fake.restore(deployed)
    modal_fake.apps.clear()
    refused("not deployed: run `posttrain modal deploy`")
    modal_fake.restore(deployed)
    modal_fake.volumes.clear()
    refused("Volume 'posttrain-runs' is missing")
    modal_fake.restore(deployed)
    monkeypatch.delenv("MODAL_TOKEN_ID")
    monkeypatch.delenv("MODAL_TOKEN_SECRET")
    refused("Modal is not configured: run `modal token new`")
    assert not modal_fake.calls  # nothing was spawned


def test_the_real_sdk_without_a_token_fails_at_once(home, monkeypatch):
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    t = time.perf_counter()
    with pytest.raises(BackendError, match="Modal is not configured"):
        ModalBackend().check_configured()
    assert time.perf_counter() - t < 5


def test_an_over_budget_modal_launch_is_refused_before_spawning(modal_fake, home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MAX_RUN_USD", "0.05")
    with pytest.raises(BudgetError, match="per-run cap"):
        launch(MODAL)
    assert not modal_fake.calls


def test_a_judge_run_keeps_the_deployed_hugging_face_secret_beside_the_judges(
    modal_fake, home, policy, monkeypatch
):
    """with_options(secrets=) replaces the function's secrets (the SDK says so): a judge's
    secret is added to the Hugging Face secret the app was deployed with, never instead of it.
    The key passes by name only."""
    import subprocess
    import sys

    from posttrain.core.errors import ConfigError

    planted = "sk-planted-0451"
    hf_id = modal_fake.create_secret("hf-read", {"HF_TOKEN": "hf_planted_token"})
    judge_id = modal_fake.create_secret("my-judge-key", {"JUDGE_KEY": planted})
    # `posttrain modal deploy` over the fake, with the HF secret named at deploy
    deployed = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "modal", "deploy"],
        env={**__import__("os").environ, "POSTTRAIN_HF_SECRET": "hf-read"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    from posttrain.core.build import fingerprint

    assert f"deployed posttrain {fingerprint()} on Python" in deployed.stdout
    assert modal_fake.apps["posttrain"]["tags"] == {
        "posttrain": fingerprint(),
        "hf_secret": "hf-read",
    }
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
    secret = {**judge, "api_key_secret": "my-judge-key"}
    started = launch({**MODAL, "reward": {"name": "judge", "params": secret}})
    call = modal_fake.calls[call_of(home, started.run_id)]
    assert list(call.definition.secret_ids) == [hf_id, judge_id]
    assert planted not in json.dumps([str(a) for a in call.args])
    detail = wait_finished(started.run_id, 180)  # the endpoint does not exist
    assert detail.status == "failed" and "judge at https://judge.invalid/v1" in detail.cause
    for folder in (runs_volume(modal_fake) / started.run_id, home / "runs" / started.run_id):
        for path in folder.rglob("*"):
            if path.is_file():
                assert planted not in path.read_text(errors="replace"), path


def test_pull_brings_every_file_of_final_subfolders_included(modal_fake, home, policy, tmp_path):
    """listdir's entries carry a FileEntryType (an IntEnum: its str() is '2' for a folder):
    folders are skipped and every file under them is downloaded."""
    run_id = launch(MODAL).run_id
    assert wait_finished(run_id, 240).status == "succeeded"
    final = runs_volume(modal_fake) / run_id / "final"
    (final / "extra" / "deeper").mkdir(parents=True)
    (final / "extra" / "deeper" / "notes.txt").write_text("kept")
    (final / "extra" / "config.json").write_text("{}")
    out = tmp_path / "pulled"
    files = {str(Path(f).relative_to(out)) for f in pull_run(run_id, out)["files"]}
    on_volume = {str(p.relative_to(final)) for p in final.rglob("*") if p.is_file()}
    assert files == on_volume and "extra/deeper/notes.txt" in files
    assert (out / "extra" / "deeper" / "notes.txt").read_text() == "kept"


def test_evaluating_a_modal_run_is_approved_like_a_launch_and_runs_there(modal_fake, home, policy):
    from posttrain.tools.evaluate import evaluate

    spec = {**MODAL, "dataset": {**MODAL["dataset"], "n_rows": 200, "holdout_share": 0.3}}
    run_id = launch(spec).run_id
    assert wait_finished(run_id, 240).status == "succeeded"
    before = set(modal_fake.calls)
    asked = evaluate(run_id, k=2, max_tasks=20)  # an A10 hour is over the $1 policy
    assert asked.status == "needs_confirmation" and asked.worst_case_usd > 1
    assert set(modal_fake.calls) == before  # nothing ran before the approval
    done = evaluate(run_id, k=2, max_tasks=20, confirmation_token=asked.confirmation_token)
    assert done.status == "done" and done.approved_by == "token"
    remote = [modal_fake.calls[c] for c in set(modal_fake.calls) - before]
    assert remote and all(c.definition.function_name == "generate" for c in remote)
    assert {c.definition.timeout_secs for c in remote} == {3600 + 90}
    assert {c.args[2] for c in remote} == {3600}  # the evaluation's own window
    assert {c.definition.resources.gpu_config.gpu_type for c in remote} == {"A10"}
    assert done.result.tasks_used >= 5 and done.result.metrics[0].name == "reward"


# The reward takes 1 s a call, so a preemption lands between checkpoints on any machine.
SLOW = """
import time

def score(completions, **columns):
    time.sleep(1.0)
    return [len(str(c)) % 7 / 7 for c in completions]
"""


def test_a_preempted_run_resumes_from_its_own_checkpoint_in_a_new_container(
    modal_fake, home, policy, tmp_path
):
    """Modal preempts with SIGINT and restarts the input on a new container, which sees the
    Volume as last committed: the run resumes after a checkpoint, not from step 0."""
    (tmp_path / "slow.py").write_text(SLOW)
    spec = {
        **MODAL,
        "reward": f"{tmp_path / 'slow.py'}:score",
        "algorithm": {**MODAL["algorithm"], "steps": 6, "save_every": 2},
    }
    run_id = launch(spec).run_id
    call_id = call_of(home, run_id)
    saved = runs_volume(modal_fake) / run_id / "checkpoints" / "checkpoint-2" / "trainer_state.json"
    wait_for(saved.exists, timeout_s=240, every_s=0.1)  # committed, and whole
    modal_fake.preempt(call_id)
    detail = wait_finished(run_id, 300)
    assert detail.status == "succeeded", detail.cause
    assert modal_fake.wait(call_id, 60)
    assert [a.how for a in modal_fake.calls[call_id].attempts] == ["preempted", "returned"]
    events = list(iter_events(home / "runs" / run_id))
    retry_start = max(i for i, e in enumerate(events) if e.get("stage") == "preparing")
    retried = [e["step"] for e in events[retry_start:] if e["type"] == "metrics"]
    assert retried and retried[0] in (3, 5) and retried[-1] == 6  # after a checkpoint, never 1
    assert any("resuming from" in e.get("message", "") for e in events[retry_start:])
    assert [e["status"] for e in events if e["type"] == "result"] == ["succeeded"]


# Every container dies on the reward's first call, as an OOM kill would end it.
CRASH = """
import os, signal

def score(completions, **columns):
    os.killpg(os.getpgid(0), signal.SIGKILL)
"""


def test_a_container_that_keeps_dying_is_billed_at_most_what_the_human_approved(
    modal_fake, home, policy, tmp_path
):
    """Modal restarts a deployed app's crashed container forever. The run's starts are
    counted on the Volume: past posttrain.gpu.attempts.MAX_STARTS a start trains nothing and
    ends the input, so the platform's bill stays within the approved worst case."""
    from posttrain.gpu.attempts import MAX_STARTS
    from posttrain.tools.plan import plan

    (tmp_path / "crash.py").write_text(CRASH)
    spec = {**MODAL, "reward": f"{tmp_path / 'crash.py'}:score"}
    approved = plan(spec).cost
    run_id = launch(spec).run_id
    call_id = call_of(home, run_id)
    assert modal_fake.wait(call_id, 600)
    hows = [a.how for a in modal_fake.calls[call_id].attempts]
    assert hows == ["crashed"] * MAX_STARTS + ["returned"] and not modal_fake.crash_cap_hit
    detail = wait_finished(run_id, 30)
    assert detail.status == "failed" and f"started {MAX_STARTS + 1} times" in detail.cause
    assert modal_fake.billed_usd(call_id) <= approved.worst_case_usd


HANG = """
import time

def score(completions, **columns):
    time.sleep(3600)
"""


def test_a_run_that_hangs_past_its_timeout_is_ended_and_its_restart_trains_nothing(
    modal_fake, home, policy, tmp_path
):
    """The trainer cannot stop (its reward hangs): at the window's end the run's result is
    written and its container ends; Modal restarts it, and the restart, past the window,
    trains nothing. No restart after a timeout spends more than a container's start."""
    from posttrain.tools.plan import plan

    (tmp_path / "hang.py").write_text(HANG)
    spec = {
        **MODAL,
        "reward": f"{tmp_path / 'hang.py'}:score",
        "compute": {**MODAL["compute"], "timeout_s": 60},
    }
    approved = plan(spec).cost
    run_id = launch(spec).run_id
    call_id = call_of(home, run_id)
    assert modal_fake.wait(call_id, 300)
    assert [a.how for a in modal_fake.calls[call_id].attempts] == ["crashed", "returned"]
    detail = wait_finished(run_id, 30)
    assert detail.status == "failed" and "did not stop when asked" in detail.cause, detail.cause
    restart = modal_fake.calls[call_id].attempts[1]
    assert restart.ended - restart.started < 30  # a container's start, no training
    assert modal_fake.billed_usd(call_id) <= approved.worst_case_usd


def test_the_trainer_stops_itself_before_its_timeout_with_final_written(modal_fake, home, policy):
    """No supervisor writes a timeout request on Modal: the run's own deadline does, a margin
    before compute.timeout_s, so the model so far is saved and Modal never kills it."""
    spec = {
        **MODAL,
        "algorithm": {**MODAL["algorithm"], "steps": 5000},
        "compute": {**MODAL["compute"], "timeout_s": 90},
    }
    run_id = launch(spec).run_id
    call_id = call_of(home, run_id)
    detail = wait_finished(run_id, 300)
    assert detail.status == "failed" and "timeout after 90 s" in detail.cause, detail.cause
    assert "the model so far is in final/" in detail.cause
    assert (runs_volume(modal_fake) / run_id / "final" / "model.safetensors").is_file()
    assert modal_fake.wait(call_id, 30)
    assert [a.how for a in modal_fake.calls[call_id].attempts] == ["returned"]
    assert modal_fake.billed_s(call_id) < 90  # its own deadline, before Modal's timeout


def test_a_dpo_run_on_modal_trains_its_pairs_and_reports_the_margin(
    modal_fake, home, policy, tmp_path
):
    """DPO through the Modal function, on pairs of the gym's words: a rhyming verse chosen
    over one that does not rhyme."""
    import random

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
    started = launch(spec)
    detail = wait_finished(started.run_id, 240)
    assert detail.status == "succeeded", detail.cause
    metrics = get_run(started.run_id, True).metrics
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all({"margin", "preference_accuracy", "logp_chosen"} <= set(m) for m in metrics)
    summary = get_run(started.run_id).preference  # DPO's figures without verbose
    assert summary["steps"] == [1, 4] and summary["margin"]["last"] == pytest.approx(
        sum(m["margin"] for m in metrics) / 4, abs=1e-4
    )
    assert (runs_volume(modal_fake) / started.run_id / "final" / "model.safetensors").is_file()


def test_a_distillation_run_on_modal_loads_its_teacher_where_the_student_trains(
    modal_fake, home, policy
):
    """The Modal function with a teacher: the tiny model distils from itself (the same
    vocabulary, the same weights: a divergence of 0, but the teacher's load, its forward pass
    and the student's sampling all run in the container)."""
    spec = {
        **MODAL,
        "reward": None,
        "algorithm": {**TINY["algorithm"], "kind": "distill", "teacher": "tiny-local"},
    }
    started = launch(spec)
    detail = wait_finished(started.run_id, 240)
    assert detail.status == "succeeded", detail.cause
    lines = [e.get("message", "") for e in iter_events(runs_volume(modal_fake) / started.run_id)]
    assert any(line.startswith("train distillation from teacher tiny-local") for line in lines)
    assert [m["step"] for m in get_run(started.run_id, True).metrics] == [1, 2, 3, 4]
