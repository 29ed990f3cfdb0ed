"""The seam every backend implements (local subprocess, Modal), and the launch path over it:
reserve -> submit -> record.

    reserve  one ledger transaction (posttrain.ledger.budget.Ledger.reserve): claim the
             idempotency key, consume the confirmation token, check the caps, reserve the
             spend, and create the run folder as `reserved`. Nothing runs yet, and a second
             launch with the same key finds this run.
    submit   outside the lock: the backend starts the work (a supervisor process, a Modal
             spawn) and returns its handle. A failure marks the run failed and releases the
             reservation and the key.
    record   the handle goes into run.json. If that fails after a spawn, the spawned work is
             withdrawn (the call cancelled) and the result says so.

So nothing is ever spawned that the ledger does not know, and the ledger's lock is never held
while a backend talks to the network. The launcher holds the run's own lock
(posttrain.runs.run_lock) from reserve until record, so a reader that reconciles runs never
writes a verdict about a run that is still being started.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from posttrain.core.errors import BackendError
from posttrain.runs.layout import RUN_META, read_json, write_json_atomic, write_result
from posttrain.runs.run_row import RunRow

if TYPE_CHECKING:
    from posttrain.spec.run_plan import RunPlan

# A generation job (prompts, k, seeds...) -> its answer ({"base", "trained", "nll", ...}).
Generate = Callable[[dict[str, Any]], dict[str, Any]]


class Backend(Protocol):
    name: str

    def ready(self) -> None:
        """Raise BackendError when a run cannot start now (before anyone is asked)."""

    def submit(self, plan: RunPlan, run_dir: Path) -> dict[str, Any]:
        """Start the run's work; its handle (pids, call id), recorded in run.json."""

    def withdraw(self, run_dir: Path, handle: dict[str, Any]) -> None:
        """Stop work submitted under `handle` that could not be recorded."""

    def reconcile(self, run_dir: Path) -> bool:
        """Bring the run directory up to date (True when it wrote or mirrored events). A
        final status is written only with proof that the run's work is gone, and only while
        holding the run's lock (posttrain.runs.run_lock): never for a run being launched."""

    def leftover(self, run_dir: Path) -> list[str]:
        """The run's processes still alive though it has a result; `cancel` stops them."""

    def cancel(self, run_dir: Path, grace_s: float = ...) -> dict[str, Any]: ...

    def cost_usd(self, row: RunRow) -> float: ...

    def unreachable(self, run_dir: Path) -> str | None: ...

    def waiting(self, run_dir: Path) -> str | None:
        """What a started run waits for before its first event (Modal: its container), as
        its stage; None once it has one."""

    def pull(self, run_dir: Path, out: Path, folder: str = "final") -> list[Path]:
        """Copy or download the run's `folder` (final/, warmstart/) into `out`."""

    def generator(self, run_dir: Path, gpu: str | None, timeout_s: int) -> Generate:
        """evaluate's generation for a finished run: a function `job -> answer` that runs
        posttrain.gpu.arms.generate_job (its base passes, then its trained pass) where this
        backend runs the run's work: local, in this process; Modal, the deployed `generate` on
        `gpu` for at most `timeout_s` (the window its price was approved for)."""


def submit_and_record(backend: Backend, plan: RunPlan, run_dir: Path, release: Any) -> None:
    """The submit and record steps for a reserved run; `release()` frees its reservation."""
    try:
        handle = backend.submit(plan, run_dir)
    except Exception as exc:
        cause = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BackendError) else str(exc)
        write_result(run_dir, "failed", f"could not start on {backend.name}: {cause}")
        release()
        raise BackendError(
            f"could not start on {backend.name}: {cause}; nothing is running and the "
            f"reservation was released"
        ) from None
    try:
        meta = read_json(run_dir / RUN_META)
        write_json_atomic(run_dir / RUN_META, {**meta, **handle, "status": "submitted"})
    except Exception as exc:
        backend.withdraw(run_dir, handle)
        write_result(
            run_dir,
            "failed",
            f"started, then cancelled at once: its handle could not be recorded ({exc})",
        )
        release()
        raise BackendError(
            f"the run started on {backend.name} but could not be recorded ({exc}); it was "
            f"cancelled at once and its reservation released. Free disk space in "
            f"{run_dir.parent} and launch again"
        ) from None
