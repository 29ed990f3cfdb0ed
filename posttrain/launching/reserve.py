"""The steps every launch takes, one run's or a group's (posttrain.tools.launch,
posttrain.launching.groups): the backend that says it can start the run now, and the run folder
created `reserved` inside the ledger's transaction.
"""

from __future__ import annotations

import time

from posttrain.core.errors import BackendError, ConfigError
from posttrain.runs.backend import Backend
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, SPEC, new_run_id, write_json_atomic
from posttrain.runs.run_lock import LaunchLock
from posttrain.spec.run_plan import RunPlan


def ready_backend(ctx: Context, plan: RunPlan) -> Backend:
    """The plan's backend, once it says it can start a run now (Modal: a token is configured
    and the deployed app carries this posttrain, two quick calls): a launch that cannot start
    fails here, before anyone approves it."""
    backend = ctx.backends.get(plan.backend)
    if backend is None:
        raise ConfigError(
            f"compute.backend '{plan.backend}' is not available here; "
            f"use backend 'local' for a free run on this machine"
        )
    backend.ready()
    return backend


def create_run(
    ctx: Context, plan: RunPlan, seq: int, approved_by: str, locks: list[LaunchLock]
) -> str:
    """The run folder, `reserved`: spec.json and run.json (the plan's answers), nothing
    running yet. Called inside the ledger's transaction. The run's lock is taken before
    run.json exists (readers list only folders with one) and appended to `locks`: the
    launcher holds it until the handle is recorded, so no reader judges the run meanwhile."""
    run_id = new_run_id()
    run_dir = ctx.root / run_id
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
        locks.append(LaunchLock(run_dir))
        (run_dir / SPEC).write_text(plan.spec.to_json(), encoding="utf-8")
        write_json_atomic(
            run_dir / RUN_META,
            {
                "run_id": run_id,
                "created_at": time.time(),
                "status": "reserved",
                "seq": seq,
                "approved_by": approved_by,
                **plan.run_meta(),
            },
        )
    except FileExistsError:  # another run's folder: never touch it
        raise BackendError(f"run id {run_id} is taken; launch again for a fresh id") from None
    except OSError as exc:  # a full or read-only disk: say so, leave nothing half-made
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
        raise BackendError(
            f"cannot create the run directory in {ctx.root}: {exc.strerror or exc}; free disk "
            f"space or make it writable (or set POSTTRAIN_HOME elsewhere); nothing was started"
        ) from None
    return run_id
