"""A run as the index holds it: one typed, frozen row of the `runs` table.

The index (posttrain.runs.store) is a cache of the run directories; this is what reading it
gives every layer above, so a column is named once here instead of as a string key in each
reader. A dataclass rather than a pydantic model: the row is read from SQLite, whose columns
already carry these types, up to 10,000 at a time on every refresh; nothing here needs
validating, and the verbs' answers (reports.run_models) are the pydantic models.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.runs.layout import FINAL_STATUSES


@dataclass(frozen=True, slots=True)
class RunRow:
    # -- what was launched (from run.json and spec.json, written once) ----------------------
    run_id: str
    run_dir: str
    """The run directory, absolute, as the index found it (`path` is the same as a Path)."""
    spec_id: str | None = None
    name: str | None = None
    backend: str | None = None
    """Where it runs ("local", "modal"); None reads as local (`backend_name`)."""
    model: str | None = None
    kind: str | None = None
    """The algorithm kind: grpo, sft, dpo, kto, distill..."""
    created_at: float | None = None  # Unix time, as every *_at below
    total_steps: int | None = None
    warmstart_steps: int | None = None
    """SFT warm-start steps run before training proper; None without a warm-start."""
    dry_run_key: str | None = None
    """A stand-in run's key: the newest succeeded run with it answers "was this dry-run?"."""
    group_id: str | None = None
    """The seed group or experiment the run belongs to; None for a run alone."""
    seed: int | None = None
    arm: str | None = None
    """An experiment's arm name; None outside an experiment."""

    # -- where it is (from its events, ingested as they come) --------------------------------
    status: str = "queued"
    """queued, running, or one of FINAL_STATUSES; a stall is derived (context.is_stalled)."""
    stage: str | None = None
    """The last stage event (loading, training...); at the end, how it ended."""
    cause: str | None = None
    """Why it failed or was cancelled, in words."""
    phase: str | None = None
    """The phase of the last metrics: "warmstart" (then `step` counts its steps) or "train"."""
    step: int = 0
    reward: float | None = None
    """The last training step's mean reward; None until one is logged."""
    best_reward: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    last_event_at: float | None = None
    """The newest event (heartbeats included): how a silent run is found stalled."""
    final: str | None = None
    """The result event's `final` section, as JSON text."""
    dry_run: str | None = None
    """The dry-run event's findings, as JSON text (reports.health.dry_run_summary reads it)."""

    # -- the index's own bookkeeping ---------------------------------------------------------
    events_offset: int = 0
    """Bytes of events.jsonl already ingested: the next ingest starts here."""
    torn_lines: int = 0
    """Event lines skipped as torn (a writer killed mid-line)."""

    @classmethod
    def from_sql(cls, row: sqlite3.Row | Mapping[str, Any]) -> RunRow:
        """A row from a `SELECT * FROM runs` (a sqlite3.Row) or a dict of columns. Columns
        the table gains later are ignored and missing ones take their default, so an index of
        another version still reads; a NULL where the column has a default (`step`) reads as
        that default."""
        keys = row.keys()
        values: dict[str, Any] = {}
        for f in _FIELDS:
            if f.name not in keys:
                continue
            value = row[f.name]
            if value is None and f.default not in (None, dataclasses.MISSING):
                continue
            values[f.name] = value
        return cls(**values)

    @property
    def path(self) -> Path:
        return Path(self.run_dir)

    @property
    def backend_name(self) -> str:
        """The backend's key in Context.backends: runs indexed without one ran here."""
        return self.backend or "local"

    @property
    def is_final(self) -> bool:
        """Succeeded, failed or cancelled: nothing more will happen to it."""
        return self.status in FINAL_STATUSES


_FIELDS = dataclasses.fields(RunRow)
