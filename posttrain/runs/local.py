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
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from posttrain.runs.layout import (
    CANCEL_REQUEST,
    PROCESS,
    RUN_META,
    has_result,
    process_alive,
    process_start,
    read_json,
    record_end,
    runs_root,
)

CANCEL_GRACE_S = 20.0  # time a trainer gets to stop after its step before SIGKILL


class LocalBackend:
    name = "local"

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or runs_root()
        self._children: dict[str, subprocess.Popen] = {}  # reaped on poll: no zombies

    def submit(self, plan: Any, run_dir: Path) -> dict[str, Any]:
        """Start the run's supervisor in its own session (it outlives this process); the
        run folder was made at reserve time."""
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
        """Give a run whose processes all died without a result its failed result.
        Returns True when it wrote one."""
        if self.alive(run_dir) or has_result(run_dir):
            return False
        # Check again after a beat: a supervisor may be writing the result right now.
        time.sleep(0.2)
        if has_result(run_dir):
            return False
        record_end(
            run_dir,
            "trainer and its supervisor are gone without a result (the machine "
            "restarted, or both were killed)",
        )
        return True

    def ready(self) -> None:
        """This machine can always start a run (it may queue)."""

    def cost_usd(self, row: dict[str, Any]) -> float:
        return 0.0  # this machine

    def unreachable(self, run_dir: Path) -> str | None:
        return None

    def pull(self, run_dir: Path, out: Path, folder: str = "final") -> list[Path]:
        """Copy the run's `folder` (final/: its adapter or weights) to `out`."""

        from posttrain.errors import NotFoundError

        source = run_dir / folder
        if not source.is_dir():
            raise NotFoundError(f"run {run_dir.name} has no {folder}/ yet (it saves at the end)")
        if source.resolve() != out.resolve():
            shutil.copytree(source, out, dirs_exist_ok=True)
        return sorted(p for p in out.rglob("*") if p.is_file())

    def cancel(self, run_dir: Path, grace_s: float = CANCEL_GRACE_S) -> dict[str, Any]:
        """Ask the trainer to stop after its step; SIGKILL it after grace_s. Reports whether
        the run really stopped and how."""
        if has_result(run_dir):
            return {"stopped": True, "how": "already finished", "forced": False}
        (run_dir / CANCEL_REQUEST).write_text(str(time.time()))
        proc = read_json(run_dir / PROCESS)
        trainer = proc.get("trainer_pid")
        if trainer and process_alive(trainer, proc.get("trainer_start")):
            _signal(trainer, signal.SIGTERM)
        deadline = time.time() + grace_s
        while time.time() < deadline and not has_result(run_dir) and self.alive(run_dir):
            time.sleep(0.2)
        forced = False
        if not has_result(run_dir):
            proc = read_json(run_dir / PROCESS)  # the trainer may have started meanwhile
            for key in ("trainer", "supervisor"):
                pid = proc.get(f"{key}_pid")
                if pid and process_alive(pid, proc.get(f"{key}_start")):
                    _signal(pid, signal.SIGKILL if key == "trainer" else signal.SIGTERM)
                    forced = True
            deadline = time.time() + 10
            while time.time() < deadline and not has_result(run_dir) and self.alive(run_dir):
                time.sleep(0.2)
            self.reconcile(run_dir)
        stopped = not self.alive(run_dir) or has_result(run_dir)
        how = (
            "stopped after its current step"
            if not forced
            else (f"did not stop within {grace_s:.0f} s; killed")
        )
        return {"stopped": stopped, "how": how, "forced": forced}


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
