"""The local backend: the trainer as a detached subprocess on this machine, at no cost.

submit() launches the supervisor of a reserved run (its folder, spec.json and run.json are
made at reserve time, posttrain.runs.backend) in a new session, so the run outlives the CLI
or server that started it; it returns at once.
The supervisor starts the trainer and records how it ended (posttrain.runs.supervisor).
Liveness comes from the recorded pids (checked against their start times, so a recycled pid
is not mistaken for the run) and the heartbeat in events.jsonl.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from posttrain.runs import forkserver
from posttrain.runs.backend import Generate
from posttrain.runs.held import is_held
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    PROCESS,
    RUN_META,
    has_result,
    process_alive,
    process_start,
    read_json,
    record_end,
    result_time,
    runs_root,
)
from posttrain.runs.queue import SUBMIT_GRACE_S
from posttrain.runs.run_lock import judging
from posttrain.runs.run_row import RunRow

DEATH_GRACE_S = 1.0  # a run that looks dead is looked at again after this before it is failed
LEFTOVER_AFTER_S = 10.0  # processes past their run's result this long are left over, not exiting
CANCEL_GRACE_S = 20.0  # time a trainer gets to stop after its step before SIGKILL
# evaluate's generation, named and imported when it runs: the lifecycle sits below gpu/ and
# starts its code by name (the trainer by process, Modal's by function name), never by import
GENERATE = "posttrain.gpu.arms:generate_job"


class LocalBackend:
    name = "local"

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or runs_root()
        self._children: dict[str, subprocess.Popen] = {}  # reaped on poll: no zombies

    def submit(self, plan: Any, run_dir: Path) -> dict[str, Any]:
        """Start the run's supervisor in its own session (it outlives this process); the
        run folder was made at reserve time. Forked by the fork server when one runs for
        this environment (its trainer skips the library imports), else a new process."""
        log_path = run_dir / "supervisor.log"
        if pid := forkserver.spawn("posttrain.runs.supervisor", [str(run_dir)], log_path):
            return {
                "supervisor_pid": pid,
                "supervisor_start": process_start(pid),
                "cwd": os.getcwd(),
            }
        with (run_dir / "supervisor.log").open("ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "posttrain.runs.supervisor", str(run_dir)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: cancel reaches all of it
                cwd=os.getcwd(),
            )
        self._children[run_dir.name] = child
        return {
            "supervisor_pid": child.pid,
            "supervisor_start": process_start(child.pid),
            "cwd": os.getcwd(),
        }

    def withdraw(self, run_dir: Path, handle: dict[str, Any]) -> None:
        """Kill a supervisor (and its trainer) whose start could not be recorded."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(handle["supervisor_pid"], signal.SIGKILL)

    def _reap(self) -> None:
        for run_id, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[run_id]

    def processes(self, run_dir: Path) -> dict[str, bool]:
        """Which of the run's processes are alive."""
        self._reap()
        meta, proc = read_json(run_dir / RUN_META), read_json(run_dir / PROCESS)
        return {
            "supervisor": process_alive(
                proc.get("supervisor_pid") or meta.get("supervisor_pid"),
                proc.get("supervisor_start") or meta.get("supervisor_start"),
            ),
            "trainer": process_alive(proc.get("trainer_pid"), proc.get("trainer_start")),
        }

    def alive(self, run_dir: Path) -> bool:
        return any(self.processes(run_dir).values())

    def reconcile(self, run_dir: Path) -> bool:
        """Give a run whose processes are provably gone its failed result; True when it
        wrote one. Proof: the run holds no launcher's lock (nobody is starting it), its
        recorded processes are dead, and still dead after DEATH_GRACE_S. A run whose
        launcher let go without recording a handle is judged only after its supervisor had
        time to start (it records its own pid in process.json)."""
        if has_result(run_dir) or is_held(run_dir) or self.alive(run_dir):
            return False  # final, queued in its experiment (runs.held), or alive
        with judging(run_dir) as mine:
            if not mine:
                return False  # its launcher is starting it, or another reader judges it
            meta, proc = read_json(run_dir / RUN_META), read_json(run_dir / PROCESS)
            recorded = meta.get("supervisor_pid") or proc.get("supervisor_pid")
            if not recorded:
                age_s = time.time() - float(meta.get("created_at") or 0)
                if age_s < SUBMIT_GRACE_S:
                    return False  # a supervisor spawned a moment ago may not have said so yet
                cause = (
                    "its launch was interrupted before the run started (the process that "
                    "launched it ended between reserve and record); nothing trained"
                )
            else:
                cause = (
                    "trainer and its supervisor are gone without a result (the machine "
                    "restarted, or both were killed)"
                )
            time.sleep(DEATH_GRACE_S)  # the second look: a supervisor may be writing now
            if has_result(run_dir) or self.alive(run_dir):
                return False
            record_end(run_dir, cause)
            return True

    def leftover(self, run_dir: Path) -> list[str]:
        """The run's processes that still live LEFTOVER_AFTER_S after its result was written
        (a status written while its trainer went on): `cancel` stops them."""
        ended_at = result_time(run_dir) if has_result(run_dir) else None
        if ended_at is None or time.time() - ended_at < LEFTOVER_AFTER_S:
            return []  # no result, or one so fresh that its processes are still exiting
        return [name for name, up in self.processes(run_dir).items() if up]

    def ready(self) -> None:
        """This machine can always start a run (it may queue)."""

    def cost_usd(self, row: RunRow) -> float:
        return 0.0  # this machine

    def unreachable(self, run_dir: Path) -> str | None:
        return None

    def waiting(self, run_dir: Path) -> str | None:
        return None

    def pull(self, run_dir: Path, out: Path, folder: str = "final") -> list[Path]:
        """Copy the run's `folder` (final/: its adapter or weights) to `out`."""

        from posttrain.core.errors import NotFoundError

        source = run_dir / folder
        if not source.is_dir():
            raise NotFoundError(f"run {run_dir.name} has no {folder}/ yet (it saves at the end)")
        if source.resolve() != out.resolve():
            shutil.copytree(source, out, dirs_exist_ok=True)
        return sorted(p for p in out.rglob("*") if p.is_file())

    def generator(self, run_dir: Path, gpu: str | None, timeout_s: int) -> Generate:
        """Generation in this process (the evaluation's job worker), from the run's folder;
        no GPU to ask for and no window to bill."""

        def generate(job: dict[str, Any]) -> dict[str, Any]:
            module, name = GENERATE.split(":")
            return getattr(importlib.import_module(module), name)(run_dir.parent, run_dir.name, job)

        return generate

    def cancel(self, run_dir: Path, grace_s: float = CANCEL_GRACE_S) -> dict[str, Any]:
        """Ask the trainer to stop after its step; SIGKILL it after grace_s, and its
        supervisor's whole process group if that does not end either. A run that has a
        result but whose processes live on is stopped too. Reports whether every process of
        the run is gone, and how."""
        ended = has_result(run_dir)
        if ended and not self.alive(run_dir):
            return {"stopped": True, "how": "already finished", "forced": False}
        if not ended:
            (run_dir / CANCEL_REQUEST).write_text(str(time.time()))
        proc = read_json(run_dir / PROCESS)
        trainer = proc.get("trainer_pid")
        if trainer and process_alive(trainer, proc.get("trainer_start")):
            _signal(trainer, signal.SIGTERM)
        self._wait_gone(run_dir, grace_s)
        forced = False
        if self.alive(run_dir):
            forced = True
            proc = read_json(run_dir / PROCESS)  # the trainer may have started meanwhile
            if proc.get("trainer_pid") and process_alive(
                proc["trainer_pid"], proc.get("trainer_start")
            ):
                _signal(proc["trainer_pid"], signal.SIGKILL)  # its supervisor records it
                self._wait_gone(run_dir, 10)
            if self.alive(run_dir):  # a supervisor that cannot record it (stopped, hung)
                meta = read_json(run_dir / RUN_META)
                pid = proc.get("supervisor_pid") or meta.get("supervisor_pid")
                if pid:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)  # the supervisor leads its own group
                self._wait_gone(run_dir, 5)
        self.reconcile(run_dir)  # a result where nobody could write one
        stopped = not self.alive(run_dir)
        if ended:
            how = "its status was already final but its processes still ran; killed"
        elif forced:
            how = f"did not stop within {grace_s:.0f} s; killed"
        else:
            how = "stopped after its current step"
        return {"stopped": stopped, "how": how, "forced": forced or ended}

    def _wait_gone(self, run_dir: Path, limit_s: float) -> None:
        deadline = time.time() + limit_s
        while time.time() < deadline and self.alive(run_dir):
            time.sleep(0.2)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
