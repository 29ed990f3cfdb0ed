"""The fork server: a local run's supervisor and trainer forked from a process that holds the
trainer's libraries, with the process relations, signals, exit codes and thread counts that a
plain start gives, and never a second supervisor for one run."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrain.core.priority import autogroup_nice
from posttrain.runs import forkserver
from posttrain.runs.layout import PROCESS, RUN_META, iter_events, process_alive, read_json
from posttrain.tools.launch import launch
from posttrain.tools.runs import cancel_run, get_run
from tests.conftest import kill_leftover_runs, wait_finished, wait_for
from tests.specs import SMOKE_SPEC, tiny


def server_pid(key: str) -> int | None:
    """The pid of the server listening for key (from the socket's peer credentials)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(forkserver.address(key))
        except OSError:
            return None
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        return int.from_bytes(creds[:4], "little")


STARTED: dict[str, list] = {}  # the server fixture's key -> the 4 server processes it started


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server of this module's own (an environment variable no other test has), started
    from another home than the tests', as launches start one, and stopped after. Four are
    started at once, as four launchers that found none would: one serves, the others leave
    (test_servers_started_at_once_leave_one_listening reads how they ended)."""
    os.environ["FORKSERVER_TEST"] = uuid.uuid4().hex
    home, os.environ["POSTTRAIN_HOME"] = (
        os.environ.get("POSTTRAIN_HOME"),
        str(tmp_path_factory.mktemp("server-home")),
    )
    try:
        key = forkserver.server_key(dict(os.environ))
        assert server_pid(key) is None
        STARTED[key] = [forkserver.start_server(key) for _ in range(4)]
        pid = wait_for(lambda: server_pid(key), 120, every_s=0.2)
    finally:
        os.environ.pop("POSTTRAIN_HOME")
        if home is not None:
            os.environ["POSTTRAIN_HOME"] = home
    yield key
    for started in STARTED.pop(key):
        started.kill()
        started.wait()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    del os.environ["FORKSERVER_TEST"]


@pytest.fixture(autouse=True)
def no_leftovers(home):
    yield
    kill_leftover_runs(home)


def stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def running_trainer(run_id: str, home: Path) -> dict:
    run_dir = home / "runs" / run_id
    wait_for(lambda: read_json(run_dir / PROCESS).get("trainer_pid"), 120, every_s=0.2)
    wait_for(lambda: any(m["step"] >= 2 for m in get_run(run_id, verbose=True).metrics), 180)
    return read_json(run_dir / PROCESS)


def model_line(run_id: str, home: Path) -> str:
    """The trainer's line saying which model it loaded, on what."""
    lines = [e.get("message", "") for e in iter_events(home / "runs" / run_id)]
    return next(line for line in lines if line.startswith("model "))


def long_spec(**algorithm) -> dict:
    return {**SMOKE_SPEC, "algorithm": {**SMOKE_SPEC["algorithm"], "steps": 400, **algorithm}}


def test_a_forked_run_has_the_process_tree_of_a_started_one_and_cancels(server, home):
    mine = os.nice(0), autogroup_nice(os.getpid())
    run_id = launch(long_spec()).run_id
    proc = running_trainer(run_id, home)
    supervisor, trainer = proc["supervisor_pid"], proc["trainer_pid"]
    # Forked, not a new interpreter: both still carry the server's command line.
    assert f"posttrain.runs.forkserver {server}" in cmdline(supervisor)
    assert f"posttrain.runs.forkserver {server}" in cmdline(trainer)
    # The supervisor leads its own session and group; the trainer is its child, in its group.
    assert os.getsid(supervisor) == supervisor and os.getpgid(supervisor) == supervisor
    assert int(stat(trainer)[1]) == supervisor and os.getpgid(trainer) == supervisor
    # It has the launcher's working directory and environment (it writes to this test's home,
    # which the server's environment does not name), and one thread, set per trainer.
    assert Path(f"/proc/{trainer}/cwd").resolve() == Path.cwd().resolve()
    # Below the launcher (the server), in its session too where the kernel shares CPU by
    # session; the launcher keeps its own priority.
    nice = max(10, mine[0])
    assert f"on cpu, 1 thread(s), nice {nice}" in model_line(run_id, home)
    assert int(stat(trainer)[16]) == int(stat(supervisor)[16]) == nice
    assert autogroup_nice(trainer) in (None, nice)
    assert (os.nice(0), autogroup_nice(os.getpid())) == mine

    outcome = cancel_run(run_id)
    assert outcome.stopped, outcome
    assert get_run(run_id).status == "cancelled"
    assert not process_alive(trainer) and not process_alive(supervisor)
    assert read_json(home / "runs" / run_id / PROCESS)["trainer_exit_code"] == 0


def test_a_forked_trainer_killed_by_a_signal_is_recorded_as_such(server, home):
    run_id = launch(long_spec()).run_id
    trainer = running_trainer(run_id, home)["trainer_pid"]
    os.kill(trainer, signal.SIGKILL)
    detail = wait_finished(run_id, 60)
    assert detail.status == "failed"
    assert detail.cause.startswith("trainer killed by SIGKILL"), detail.cause
    assert read_json(home / "runs" / run_id / PROCESS)["trainer_exit_code"] == -signal.SIGKILL


def test_a_forked_trainer_uses_the_threads_it_is_given(server, home, monkeypatch):
    """The server imports with one OpenMP thread; a trainer given two gets two, and
    finishes (an OpenMP pool forked from a parent that used one hangs)."""
    monkeypatch.setenv("POSTTRAIN_CPU_THREADS", "2")
    run_id = launch(long_spec(steps=8, batch_size=16)).run_id
    trainer = running_trainer(run_id, home)["trainer_pid"]
    assert f"posttrain.runs.forkserver {server}" in cmdline(trainer)
    assert "on cpu, 2 thread(s)" in model_line(run_id, home)
    assert wait_finished(run_id, 300).status == "succeeded"


def test_a_launcher_that_gives_up_before_its_go_gets_no_supervisor(server, tmp_path):
    run_dir = tmp_path / "run-never"
    run_dir.mkdir()
    request = {
        "module": "posttrain.runs.supervisor",
        "args": [str(run_dir)],
        "log": str(run_dir / "supervisor.log"),
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(forkserver.address(server))
        sock.sendall(json.dumps({**request, "cwd": os.getcwd(), "env": dict(os.environ)}).encode())
        sock.sendall(b"\n")
        pid = json.loads(sock.makefile("rb").readline())["pid"]
        assert process_alive(pid)
    # closed without "go": the fork leaves, having written nothing
    wait_for(lambda: not process_alive(pid), 30, every_s=0.1)
    assert sorted(p.name for p in run_dir.iterdir()) == []


def test_the_key_follows_what_libraries_read_at_import_not_the_home_or_test():
    env = dict(os.environ)
    key = forkserver.server_key(env)
    same = {
        **env,
        "POSTTRAIN_HOME": "/elsewhere",
        "PYTEST_CURRENT_TEST": "x",
        "OMP_NUM_THREADS": "7",
        "COLUMNS": "200",  # a CLI given a wide table
    }
    assert forkserver.server_key(same) == key
    assert forkserver.server_key({**env, "HF_HUB_OFFLINE": "0"}) != key
    assert forkserver.server_key({**env, "OMP_WAIT_POLICY": "ACTIVE"}) != key


def test_the_libraries_a_server_preloads_leave_the_key_as_it_was_and_are_frozen():
    """torch sets 3 variables on import; a launcher that imported it (this suite's workers did,
    mid-run) asked a server of another key, started it, and ran its trainers plainly."""
    probe = (
        "import os; from posttrain.runs import forkserver as f; "
        "import gc; k = f.server_key(dict(os.environ)); f.preload(); "
        "print(gc.get_freeze_count(), len(gc.get_objects()), "
        "k == f.server_key(dict(os.environ)), sorted(set(os.environ) - set(ENV)))"
    )
    env = {k: v for k, v in os.environ.items() if k not in forkserver.UNKEYED}
    out = subprocess.run(
        [sys.executable, "-c", f"ENV = {sorted(env)!r}; {probe}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    frozen, collectable, same, added = out.stdout.split(" ", 3)
    assert same == "True", f"the preload set {added.strip()}"
    # what it loaded is out of the collector's walks, in the server and each fork of it
    assert int(frozen) > 100_000 and int(collectable) < int(frozen) // 100, out.stdout


def test_without_a_server_a_launch_starts_one_and_its_run_starts_plainly(home, monkeypatch):
    monkeypatch.setenv("FORKSERVER_TEST", uuid.uuid4().hex)
    key = forkserver.server_key(dict(os.environ))
    assert server_pid(key) is None
    run_id = launch({**SMOKE_SPEC, "algorithm": {**SMOKE_SPEC["algorithm"], "steps": 2}}).run_id
    try:
        supervisor = read_json(home / "runs" / run_id / RUN_META)["supervisor_pid"]
        assert "-m posttrain.runs.supervisor" in cmdline(supervisor)  # a new interpreter
        wait_for(lambda: server_pid(key), 120, every_s=0.2)  # ready for the next launch
        assert wait_finished(run_id, 300).status == "succeeded"
        nice = max(10, os.nice(0))  # inherited from its supervisor; this process's own kept
        assert f"on cpu, 1 thread(s), nice {nice}" in model_line(run_id, home)
    finally:
        if pid := server_pid(key):
            os.kill(pid, signal.SIGTERM)


def test_a_server_forks_only_the_modules_it_serves(server):
    request = {"module": "os", "args": [], "log": os.devnull, "cwd": "/", "env": {}}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(forkserver.address(server))
        sock.settimeout(30)
        sock.sendall(json.dumps(request).encode() + b"\n")
        assert sock.makefile("rb").readline() == b""  # closed unanswered
    assert forkserver.spawn("os", [], Path(os.devnull)) is None


def spy_on(monkeypatch, module: str, name: str) -> list:
    """What the real forkserver.<name> returned, each time `module` called it."""
    returned = []

    def call(*args, **kwargs):
        returned.append(getattr(forkserver, name)(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(f"{module}.forkserver", SimpleNamespace(**{name: call}))
    return returned


def test_a_job_worker_is_forked_too_and_reports_its_end(server, home, tmp_path, monkeypatch):
    from posttrain.jobs.detached import get_job, jobs_root, start_job
    from posttrain.runs.layout import runs_root

    forked = spy_on(monkeypatch, "posttrain.jobs.detached", "spawn")
    args = {"run_id": "run-000000-000000-none", "out": str(tmp_path / "out")}
    job = start_job("export", {**args, "merged": False, "push_to_hub": None}, runs_root())
    pid = read_json(jobs_root() / job.job_id / "process.json")["pid"]
    assert forked == [pid]  # the server's fork, not a new interpreter
    wait_for(lambda: get_job(job.job_id).status in ("failed", "succeeded"), 120)
    assert get_job(job.job_id).status == "failed"
    assert "run-000000-000000-none" in get_job(job.job_id).error


def test_a_merge_is_forked_and_a_failed_one_reads_as_before(server, home, tmp_path, monkeypatch):
    from posttrain.core.errors import BackendError
    from posttrain.tools.export import export_run

    codes = spy_on(monkeypatch, "posttrain.tools.export", "run_forked")
    run_id = launch(tiny(steps=2)).run_id
    assert wait_finished(run_id, 180).status == "succeeded"
    out = tmp_path / "out"
    result = export_run(run_id, out / "model", roots=[out])
    assert codes == [0]  # the server's fork ran it, and said how it ended
    assert result.merged is False and "model.safetensors" in result.files  # a full fine-tune
    for weights in (home / "runs" / run_id / "final").glob("*.safetensors"):
        weights.unlink()
    with pytest.raises(BackendError, match=f"merging run {run_id} failed: .*Error"):
        export_run(run_id, out / "again", roots=[out])
    assert codes[1] not in (0, None)
    assert [p.name for p in out.iterdir()] == ["model"]  # no log, no code, no half folder


def test_servers_started_at_once_leave_one_listening(server):
    """Four launchers that each found no server start four at once (the module's server
    fixture did): one binds the name and serves, the others leave."""
    servers = STARTED[server]
    pid = server_pid(server)
    assert pid in [s.pid for s in servers]
    for other in (s for s in servers if s.pid != pid):
        assert other.wait(timeout=60) == 0  # left: the name was taken
    assert servers[[s.pid for s in servers].index(pid)].poll() is None
