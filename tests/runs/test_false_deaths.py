"""No false deaths: a run is declared gone only when it is, and one key is one run across
processes. A launcher or a supervisor is stopped (SIGSTOP) at each stage of a launch; other
processes read the run list and launch with the same key meanwhile; then it continues."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrain.runs.context import Context
from posttrain.runs.layout import PROCESS, RUN_META, iter_events, read_json, write_json_atomic
from posttrain.runs.local import LocalBackend
from posttrain.runs.run_lock import LaunchLock
from posttrain.tools.runs import cancel_run, get_run
from tests.conftest import ROOT, kill_leftover_runs, wait_finished, wait_for
from tests.specs import tiny

SPEC = tiny(steps=2)

# A launcher in a process of its own that stops itself (SIGSTOP) at one stage of the launch,
# or stops the supervisor it has just spawned, so the test can look at the run from outside.
LAUNCHER = """
import json, os, signal, sys
sys.path.insert(0, {root!r})
from posttrain.runs import local
from posttrain.tools import launch as launching

stage = sys.argv[2]
original_submit = launching.submit_and_record
original_spawn = local.LocalBackend.submit

def submit_and_record(*args, **kwargs):
    if stage == "reserved":  # the run folder exists, nothing is started
        os.kill(os.getpid(), signal.SIGSTOP)
    return original_submit(*args, **kwargs)

def spawn(self, plan, run_dir):
    handle = original_spawn(self, plan, run_dir)
    if stage == "spawned":  # the supervisor runs, its pid is not recorded yet
        os.kill(os.getpid(), signal.SIGSTOP)
    if stage == "supervisor-stopped":  # the supervisor itself stops before it says anything
        os.kill(handle["supervisor_pid"], signal.SIGSTOP)
    return handle

launching.submit_and_record = submit_and_record
local.LocalBackend.submit = spawn
result = launching.launch(json.loads(sys.argv[1]), idempotency_key="the-key")
print(json.dumps([result.status, result.run_id]))
"""


def cli(*args: str, timeout_s: float = 120) -> dict | list:
    done = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def only_run(home: Path) -> Path:
    runs = [p for p in (home / "runs").iterdir() if (p / RUN_META).is_file()]
    assert len(runs) == 1, [p.name for p in runs]
    return runs[0]


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["reserved", "spawned", "supervisor-stopped", "training"])
def test_a_run_stopped_at_any_stage_of_its_launch_is_never_failed_by_a_reader(
    home, tmp_path, stage
):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.format(root=str(ROOT)))
    launcher = subprocess.Popen(
        [sys.executable, str(script), json.dumps(SPEC), stage],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    supervisor = None
    try:
        if stage in ("reserved", "spawned"):
            wait_for(lambda: stopped(launcher.pid), timeout_s=60, every_s=0.1)
        else:
            assert launcher.wait(timeout=60) == 0, launcher.stderr.read()
        run_dir = only_run(home)
        if stage == "spawned":  # the supervisor says who it is, with no handle in run.json
            wait_for(lambda: read_json(run_dir / PROCESS).get("supervisor_pid"), 60, 0.1)
            assert "supervisor_pid" not in read_json(run_dir / RUN_META)
        if stage == "supervisor-stopped":
            supervisor = read_json(run_dir / RUN_META)["supervisor_pid"]
            assert stopped(supervisor)
        if stage == "training":  # stop the supervisor while its trainer trains
            wait_for(lambda: read_json(run_dir / PROCESS).get("trainer_pid"), 60, 0.1)
            supervisor = read_json(run_dir / PROCESS)["supervisor_pid"]
            os.kill(supervisor, signal.SIGSTOP)

        # Readers in other processes, and a second launch with the same key.
        for _ in range(2):
            listed = cli("run", "list")
            (row,) = [r for r in listed if r["run_id"] == run_dir.name]
            assert row["status"] not in ("failed", "cancelled"), row
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(SPEC))
        again = cli("launch", str(spec_file), "--idempotency-key", "the-key")
        assert again["status"] == "existing" and again["run_id"] == run_dir.name
        # its trainer may have finished meanwhile (stage "spawned"), never failed
        ends = [e["status"] for e in iter_events(run_dir) if e["type"] == "result"]
        assert ends in ([], ["succeeded"]), ends

        # Then it goes on, and ends as it would have: one run, succeeded.
        if launcher.poll() is None:
            os.kill(launcher.pid, signal.SIGCONT)
        if supervisor:
            os.kill(supervisor, signal.SIGCONT)
        out, err = launcher.communicate(timeout=60)
        assert launcher.returncode == 0, err[-2000:]
        assert json.loads(out.strip().splitlines()[-1]) == ["started", run_dir.name]
        assert wait_finished(run_dir.name, timeout_s=240).status == "succeeded"
        assert only_run(home) == run_dir
    finally:
        launcher.kill()
        if supervisor:
            with contextlib.suppress(ProcessLookupError):
                os.kill(supervisor, signal.SIGCONT)
        kill_leftover_runs(home)


def reserved_run(home: Path, age_s: float) -> Path:
    """A run folder as a launcher leaves it when it dies between reserve and record."""
    run_dir = home / "runs" / "run-261202-000000-dead"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"algorithm": {"kind": "grpo"}}))
    write_json_atomic(
        run_dir / RUN_META,
        {
            "run_id": run_dir.name,
            "status": "reserved",
            "backend": "local",
            "created_at": time.time() - age_s,
        },
    )
    return run_dir


def test_a_launch_interrupted_moments_ago_is_not_judged_yet(home):
    run_dir = reserved_run(home, age_s=1)
    assert LocalBackend(home / "runs").reconcile(run_dir) is False
    assert not list(iter_events(run_dir))


def test_a_launch_whose_launcher_died_long_ago_fails_saying_so_and_frees_nothing_else(home):
    run_dir = reserved_run(home, age_s=600)
    detail = get_run(run_dir.name, ctx=Context())
    assert detail.status == "failed"
    assert "launch was interrupted before the run started" in detail.cause


def test_a_run_whose_launcher_holds_it_is_never_judged_however_old(home):
    run_dir = reserved_run(home, age_s=600)
    lock = LaunchLock(run_dir)  # the launcher lives (stopped, or slow to record)
    try:
        assert get_run(run_dir.name, ctx=Context()).status == "queued"
        assert not list(iter_events(run_dir))
    finally:
        lock.release()


@pytest.mark.slow
def test_cancel_stops_a_trainer_whose_run_was_already_marked_failed(home):
    """A status written wrongly (by an older posttrain, or by hand) while the trainer went on:
    get_run says so, the key stays with the run, and cancel stops every process."""
    from posttrain.tools.launch import launch

    run_id = launch(tiny(steps=400), idempotency_key="k").run_id
    run_dir = home / "runs" / run_id
    wait_for(lambda: read_json(run_dir / PROCESS).get("trainer_pid"), 120, 0.2)
    from posttrain.runs.layout import write_result

    write_result(run_dir, "failed", "a false death")
    pids = read_json(run_dir / PROCESS)
    try:
        import posttrain.runs.local as local

        local.LEFTOVER_AFTER_S, saved = 0.0, local.LEFTOVER_AFTER_S
        try:
            detail = get_run(run_id)
            assert detail.status == "failed" and "trainer" in detail.still_running
            assert launch(tiny(steps=400), idempotency_key="k").status == "existing"
            result = cancel_run(run_id, grace_s=5)
        finally:
            local.LEFTOVER_AFTER_S = saved
        assert result.stopped and "still ran" in result.how
        for key in ("trainer", "supervisor"):
            assert not Path(f"/proc/{pids[f'{key}_pid']}").exists() or stopped_or_zombie(
                pids[f"{key}_pid"]
            )
    finally:
        kill_leftover_runs(home)


def stopped_or_zombie(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@pytest.mark.slow
def test_concurrent_cli_launches_with_one_key_beside_a_cpu_hog_start_one_run_each(tmp_path):
    """bench/launch_race.py's acceptance shape, one round: 4 CLI launches at once with one key,
    `run list` readers beside them and a CPU hog; every run ends succeeded."""
    bench = ROOT / "bench" / "launch_race.py"
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, str(bench), "--rounds", "1", "--mode", "cli", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, (report, done.stderr[-2000:])
    assert report["run_folders"] == 1 and report["statuses"] == {"succeeded": 1}
