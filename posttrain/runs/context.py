"""What every tool call shares: the index, the backends, and keeping both current.

`Context.refresh()` ingests new events and reconciles runs whose processes died without a
result, so a status read after a crash, a restart or a SIGKILL tells the truth.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.core.errors import NotFoundError
from posttrain.core.paths import home
from posttrain.runs.backend import Backend
from posttrain.runs.held import start_held
from posttrain.runs.layout import check_run_id, has_result, runs_root
from posttrain.runs.local import LocalBackend
from posttrain.runs.modal_backend import ModalBackend
from posttrain.runs.run_row import RunRow
from posttrain.runs.store import Store

STALL_AFTER_S = float(os.environ.get("POSTTRAIN_STALL_S", "180"))  # no event for this long
log = logging.getLogger("posttrain")


@dataclass
class Context:
    root: Path = field(default_factory=runs_root)
    store: Store | None = None
    backends: dict[str, Backend] = field(default_factory=dict)
    degraded: str | None = None  # set while the index cannot be written
    # frees the ledger's reservation of a queued run that could not start (runs.held); set by
    # the launching layer, which owns the ledger; without it the reservation stays counted
    release: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.store is None:
            self.store = Store(home() / "index.sqlite", root=self.root)
        self.backends.setdefault("local", LocalBackend(self.root))
        self.backends.setdefault("modal", ModalBackend(self.root))

    @property
    def index(self) -> Store:
        assert self.store is not None
        return self.store

    def refresh(self, run_id: str | None = None) -> None:
        """Ingest new events; give dead runs their result; then ingest that too. When the
        index cannot be written (a full or read-only disk), answer from it as it is and say
        so in `degraded`: reading runs must keep working."""
        try:
            self._refresh(run_id)
            self.degraded = None
        except (sqlite3.OperationalError, OSError) as exc:
            self.degraded = (
                f"the index could not be updated ({exc}); showing what it held "
                f"before. Free disk space in {home()} or make it writable"
            )
            log.warning(self.degraded)

    def _refresh(self, run_id: str | None) -> None:
        ids = [run_id] if run_id else None
        self.index.sync(ids)
        rows = [self.index.get(run_id)] if run_id else self.index.list_runs(limit=10_000)
        for row in rows:
            if not row or row.is_final:
                continue
            backend = self.backends.get(row.backend_name)
            if backend is not None and backend.reconcile(row.path):
                # the backend wrote or mirrored events: read them now
                self.index.ingest(row.path, final=has_result(row.path))
        # an experiment's queued runs whose place has freed (sweep.max_parallel): started now
        groups = {
            g: [self.root / r for r in self.index.group_runs(g)] for g in self.index.open_groups()
        }
        if started := start_held(groups, self.backends, self.release):
            self.index.sync(started)

    def run(self, run_id: str) -> RunRow:
        """The run's index row after a refresh, or NotFoundError."""
        check_run_id(run_id)
        if not (self.root / run_id).is_dir():
            raise NotFoundError(f"no run '{run_id}'; list runs with `posttrain run list`")
        self.refresh(run_id)
        row = self.index.get(run_id)
        if row is None:
            raise NotFoundError(f"no run '{run_id}'; list runs with `posttrain run list`")
        return row

    def backend(self, name: str) -> Backend:
        return self.backends[name]

    def cost_usd(self, row: RunRow) -> float:
        backend = self.backends.get(row.backend_name)
        return backend.cost_usd(row) if backend is not None else 0.0


def is_stalled(row: RunRow, now: float | None = None) -> bool:
    """Running, but silent for longer than STALL_AFTER_S (heartbeats come every 10 s)."""
    if row.status != "running" or not row.last_event_at:
        return False
    return (now or time.time()) - row.last_event_at > STALL_AFTER_S
