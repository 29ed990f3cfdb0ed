"""An experiment's queue (`sweep.max_parallel`): runs reserved in the ledger, held back until
a place in their experiment frees.

A held run is made like every other, inside the ledger's one transaction for the experiment
(so nothing that starts later is unknown to the ledger, and the approval covered it), but its
submit waits: run.json carries `held: {"max_parallel": N}` and plan.json the plan it was
priced with. Every refresh of the index (any poll of get_run, list_runs, the dashboard, in
any process: the queue lives in the run folders, so it outlives the server) calls
`start_held`, which submits the next held runs of an experiment, in its order (arm, then
seed), while fewer than N of its runs are unfinished and not held. A held run is started only
under its run lock, and never once it has a result or a cancel request: a cancelled
experiment's queued runs never start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from posttrain.core.errors import BackendError
from posttrain.runs.backend import Backend, submit_and_record
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    RUN_META,
    EventWriter,
    has_result,
    read_json,
    write_json_atomic,
    write_result,
)
from posttrain.runs.run_lock import judging
from posttrain.spec.run_plan import RunPlan

HELD = "held"  # run.json's key while the run waits for a place in its experiment
PLAN = "plan.json"  # the plan a held run was priced and approved with, submitted as it was
log = logging.getLogger("posttrain")


def hold(run_dir: Path, plan: RunPlan, max_parallel: int) -> None:
    """Mark a reserved run as waiting for a place (called while its folder is made)."""
    (run_dir / PLAN).write_text(plan.model_dump_json(), encoding="utf-8")
    meta = read_json(run_dir / RUN_META)
    write_json_atomic(run_dir / RUN_META, {**meta, HELD: {"max_parallel": max_parallel}})
    events = EventWriter(run_dir)
    events.write(
        "log",
        level="info",
        message=f"queued: waiting for a place in its experiment (sweep.max_parallel: "
        f"{max_parallel} runs at once); it starts when an earlier run ends",
    )
    events.close()


def is_held(run_dir: Path, meta: Mapping[str, Any] | None = None) -> bool:
    """Still waiting: held, never submitted, no result."""
    meta = read_json(run_dir / RUN_META) if meta is None else meta
    return bool(meta.get(HELD)) and not has_result(run_dir)


def cancel_held(run_dir: Path) -> bool:
    """Cancel a run still waiting for its place: True when it was held and now never starts.
    The cancel request goes down first, so a start racing this one sees it under the lock."""
    if not is_held(run_dir):
        return False
    (run_dir / CANCEL_REQUEST).write_text(str(time.time()))
    deadline = time.time() + 10.0
    while time.time() < deadline:
        with judging(run_dir) as mine:
            if mine:
                if not is_held(run_dir):
                    return has_result(run_dir)  # started meanwhile: the caller cancels it
                write_result(
                    run_dir,
                    "cancelled",
                    "cancelled while queued in its experiment (it never started)",
                )
                return True
        time.sleep(0.05)  # a start holds the lock for one submit
    return False


def start_held(
    groups: Mapping[str, list[Path]],
    backends: Mapping[str, Backend],
    release: Callable[[str], None] | None = None,
) -> list[str]:
    """Submit the held runs of `groups` (group id -> its run folders) that have a place now;
    their ids. `release(run_id)` frees the ledger's reservation of one that could not start
    (the caller's, from above runs/)."""
    started: list[str] = []
    for dirs in groups.values():
        runs = [(d, read_json(d / RUN_META)) for d in dirs]
        waiting = [(d, m) for d, m in runs if is_held(d, m)]
        if not waiting:
            continue
        live = sum(1 for d, m in runs if not has_result(d) and not is_held(d, m))
        cap = int(waiting[0][1][HELD].get("max_parallel") or 1)
        waiting.sort(key=lambda x: (x[1].get("arm_index", 0), x[1].get("seed", 0), x[0].name))
        for run_dir, _ in waiting[: max(0, cap - live)]:
            if _start(run_dir, backends, release):
                started.append(run_dir.name)
    return started


def _start(
    run_dir: Path, backends: Mapping[str, Backend], release: Callable[[str], None] | None
) -> bool:
    with judging(run_dir) as mine:
        if not mine or not is_held(run_dir):
            return False  # another process starts it, or it ended meanwhile
        if (run_dir / CANCEL_REQUEST).exists():
            write_result(run_dir, "cancelled", "cancelled while queued (it never started)")
            return False
        meta = read_json(run_dir / RUN_META)
        backend = backends.get(meta.get("backend") or "local")
        try:
            plan = RunPlan.model_validate_json((run_dir / PLAN).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # a plan from another posttrain, or a torn file
            write_result(run_dir, "failed", f"queued, then could not start: its plan.json ({exc})")
            (release or _keep)(run_dir.name)
            return False
        if backend is None:
            return False
        # the hold goes before the submit: a crash between the two leaves a run that the
        # backend's reconcile judges (no handle: its launch was interrupted), never a second
        # spawn of the same run
        write_json_atomic(run_dir / RUN_META, {**meta, HELD: None, "released_at": time.time()})
        try:
            submit_and_record(backend, plan, run_dir, lambda: (release or _keep)(run_dir.name))
        except BackendError as exc:
            log.warning("queued run %s could not start: %s", run_dir.name, exc)
            return False
        return True


def _keep(run_id: str) -> None:
    """No ledger at hand: the failed run's reservation stays counted today (the safe side)."""
