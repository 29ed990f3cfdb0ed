"""The local backend's run limit: at most N trainers at once, the rest queue in order.

Slots are lock files under $POSTTRAIN_HOME/slots; a supervisor holds one (fcntl.flock) for
as long as its trainer lives, and the kernel frees it however the process ends, SIGKILL
included. A queued run tries for a slot only when every earlier queued run has started, so
runs start in the order they were created.

On a CPU the cores are shared out among the slots: PyTorch's OpenMP threads spin-wait, and
two trainers with a thread per core each were measured here 38x slower than one.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import IO

from posttrain.core.paths import home
from posttrain.runs.held import is_held
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    PROCESS,
    RUN_META,
    EventWriter,
    has_result,
    process_alive,
    read_json,
)

POLL_S = 0.5
SUBMIT_GRACE_S = 30.0  # a reserved run whose supervisor is being started still holds its place


def max_local_runs() -> int:
    """$POSTTRAIN_LOCAL_MAX_RUNS, default 1: one trainer owns the machine's cores."""
    try:
        return max(1, int(os.environ.get("POSTTRAIN_LOCAL_MAX_RUNS", "1")))
    except ValueError:
        return 1


def cpu_thread_env() -> dict[str, str]:
    """Threads per trainer: $POSTTRAIN_CPU_THREADS, else the cores divided among the slots.

    Also for the tiny model: measured one after the other on 2 quiet cores (2026-12-03, the
    whole `posttrain demo`), 2 threads took 172 s and 1 thread 224 s. (60 + 60 steps of it
    had read the other way, 94 against 88 s: too short a run to decide.) The test suite pins
    one thread (tests/conftest.py): its 4 workers share 2 cores, and a second thread's extra
    CPU, ~25% on the demo, is taken from them."""
    threads = os.environ.get("POSTTRAIN_CPU_THREADS") or str(
        max(1, (os.cpu_count() or 1) // max_local_runs())
    )
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def _waiting(run_dir: Path, meta: dict) -> bool:
    """Queued: no trainer has started and no result is written, and its supervisor lives,
    or is still being started (a reserved run, submitted a moment ago)."""
    if has_result(run_dir) or is_held(run_dir, meta):
        return False  # ended, or held back by its experiment's cap (runs.held): not in line
    proc = read_json(run_dir / PROCESS)
    if proc.get("trainer_pid"):
        return False
    if proc.get("supervisor_pid"):
        return process_alive(proc.get("supervisor_pid"), proc.get("supervisor_start"))
    if meta.get("supervisor_pid"):
        return process_alive(meta.get("supervisor_pid"), meta.get("supervisor_start"))
    fresh = time.time() - float(meta.get("created_at") or 0) < SUBMIT_GRACE_S
    return meta.get("status") == "reserved" and fresh


def _order(meta: dict, run_dir: Path) -> tuple[int, float, str]:
    """Launch order: the ledger's sequence number, given at reserve time (then the creation
    time and the id, for runs from before it)."""
    return (int(meta.get("seq") or 0), float(meta.get("created_at") or 0), run_dir.name)


def _earlier_waiting(run_dir: Path) -> bool:
    mine = _order(read_json(run_dir / RUN_META), run_dir)
    for other in run_dir.parent.iterdir():
        if other == run_dir or not (other / RUN_META).is_file():
            continue
        meta = read_json(other / RUN_META)
        if (meta.get("backend") or "local") != "local":
            continue  # a Modal run does not take a local slot
        if _order(meta, other) < mine and _waiting(other, meta):
            return True
    return False


def _try_slot() -> IO[bytes] | None:
    folder = home() / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(max_local_runs()):
        handle = (folder / f"slot-{i}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            handle.close()
    return None


def wait_for_slot(run_dir: Path) -> IO[bytes] | None:
    """Block until this run may start; None if it was cancelled while waiting."""
    announced = False
    while True:
        if (run_dir / CANCEL_REQUEST).exists():
            return None
        if not _earlier_waiting(run_dir):
            slot = _try_slot()
            if slot is not None:
                return slot
        if not announced:
            events = EventWriter(run_dir)
            events.write(
                "log",
                level="info",
                message=(
                    f"queued: waiting for a free local slot ({max_local_runs()} run(s) at once; "
                    f"set POSTTRAIN_LOCAL_MAX_RUNS to change)"
                ),
            )
            events.close()
            announced = True
        time.sleep(POLL_S)
