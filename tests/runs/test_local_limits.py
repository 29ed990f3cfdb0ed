"""What holds a local run: its compute.timeout_s, and rank 0 alone writing its directory when
it trains in several processes. Real trainers, real processes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from posttrain.runs.layout import RUN_META, SPEC, iter_events, write_json_atomic
from posttrain.spec.schema import load_spec
from posttrain.tools.launch import launch
from tests.conftest import kill_leftover_runs, wait_finished
from tests.specs import tiny

pytestmark = pytest.mark.slow

TINY = {**tiny(steps=5000), "compute": {"backend": "local", "timeout_s": 90}}


# A reward that waits: the trainer spends its 90 s asleep, not on the CPU the other tests use.
# 90 s, not 60: on a loaded CI machine the trainer's start-up and first step took ~60 s.
SLOW_REWARD = """
import time

def slow(completions, **columns):
    time.sleep(1.0)
    return [len(str(c)) % 7 / 7 for c in completions]
"""


def test_a_local_run_is_stopped_at_its_timeout_and_fails_saying_so(home, tmp_path):
    (tmp_path / "slow_reward.py").write_text(SLOW_REWARD)
    t = time.time()
    run_id = launch({**TINY, "reward": f"{tmp_path / 'slow_reward.py'}:slow"}).run_id
    try:
        detail = wait_finished(run_id, 300)
    finally:
        kill_leftover_runs(home)
    took = time.time() - t
    assert detail.status == "failed"
    assert detail.cause.startswith("timeout after 90 s (compute.timeout_s): stopped after step")
    # Stopped mid-training, after the limit and long before its 5,000 steps. How many steps fit,
    # and how long the last one takes, depend on the machine's load: quiet, 6 or more steps;
    # in CI beside the suite, 1 (a step is several 1 s reward calls).
    assert 1 <= detail.step < 5000 and took < 240, (detail.step, took)
    assert (home / "runs" / run_id / "final").is_dir()  # the model so far is kept


def test_training_in_two_processes_writes_one_set_of_events_and_one_result(home, tmp_path):
    spec = load_spec(
        {
            **TINY,
            "algorithm": {**TINY["algorithm"], "steps": 3, "save_every": 2},
            "compute": {"backend": "local"},
        }
    )
    run_dir = home / "runs" / "run-ddp-0001"
    run_dir.mkdir(parents=True)
    (run_dir / SPEC).write_text(spec.to_json())
    write_json_atomic(run_dir / RUN_META, {"run_id": run_dir.name, "backend": "local"})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(  # torch.distributed over gloo: two CPU ranks, data parallel
        [
            *(sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"),
            *("-m", "posttrain.gpu.train", str(run_dir)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    events = list(iter_events(run_dir))
    assert [e["status"] for e in events if e["type"] == "result"] == ["succeeded"]
    steps = [e["step"] for e in events if e["type"] == "metrics"]
    assert steps == [1, 2, 3]  # once each: rank 1 trained too, and wrote nothing
    assert sum(e["type"] == "proof_step" for e in events) == 1
    assert sum(e["type"] == "stage" and e["stage"] == "preparing" for e in events) == 1
    holdout = (run_dir / "holdout.jsonl").read_text().splitlines()
    assert holdout and len(holdout) == len(set(holdout))
    assert json.loads((run_dir / "final" / "config.json").read_text())["model_type"] == "qwen3"


@pytest.mark.parametrize(
    ("trainer", "cause"),
    [
        (  # dies of the SIGTERM that asks it to stop: it was not killed by the supervisor
            "print('step 7', flush=True); time.sleep(60)",
            "asked to stop, the trainer killed by SIGTERM before writing a result; "
            "last output: step 7",
        ),
        (  # deaf to it: killed after the grace
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('deaf', flush=True); "
            "time.sleep(60)",
            "the trainer did not stop within 2 s and was killed",
        ),
    ],
)
def test_at_its_timeout_a_trainer_that_writes_no_result_is_said_to_have_ended_as_it_did(
    home, monkeypatch, trainer, cause
):
    """The supervisor's own result, when the trainer wrote none: how it really ended."""
    from posttrain.runs import supervisor

    run_dir = home / "runs" / "run-000000-000000-stop"
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / SPEC, {"compute": {"backend": "local", "timeout_s": 1}})
    write_json_atomic(run_dir / RUN_META, {"run_id": run_dir.name, "backend": "local"})
    code = f"import signal, time; {trainer}"
    monkeypatch.setattr(supervisor, "TIMEOUT_GRACE_S", 2.0)
    monkeypatch.setattr(  # a stand-in trainer, a real process: it never writes a result
        supervisor,
        "start_trainer",
        lambda run_dir, env: subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),  # as the real
        ),
    )
    ignored = signal.getsignal(signal.SIGTERM)
    try:
        assert supervisor.supervise(run_dir) == 0
    finally:
        signal.signal(signal.SIGTERM, ignored)  # it ignores SIGTERM for itself
    results = [e for e in iter_events(run_dir) if e["type"] == "result"]
    assert [r["status"] for r in results] == ["failed"]
    assert results[0]["cause"] == f"timeout after 1 s (compute.timeout_s): {cause}"
