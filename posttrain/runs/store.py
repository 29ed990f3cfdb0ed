"""The SQLite index of runs, metrics, logs (FTS5) and traces: a cache of the run directories.

Ingestion reads each run's events.jsonl from the byte offset it reached last time and
applies the new events in one transaction together with the new offset, so it is
incremental and idempotent: a crash mid-ingest replays nothing twice, and deleting the
database loses nothing (`rebuild()` reads every directory again). Log cursors are the byte
offsets of the log events in events.jsonl, so they survive a rebuild too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from posttrain.core.paths import home
from posttrain.runs.layout import (
    EVENTS,
    FINAL_STATUSES,
    RUN_META,
    SPEC,
    read_events,
    read_json,
    runs_root,
)
from posttrain.runs.measured import record
from posttrain.runs.queries import Queries
from posttrain.spec.keys import dry_run_key

# 2: dry runs, rendered prompts, measured step times; 3: run groups; 4: SFT training text;
# 5: traces keep an environment run's whole episode
SCHEMA_VERSION = 7  # 6: an experiment's arm; 7: a judge's reason beside a trace's reward
log = logging.getLogger(__name__)
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, spec_id TEXT, name TEXT, backend TEXT, model TEXT, kind TEXT,
    run_dir TEXT NOT NULL, created_at REAL, started_at REAL, ended_at REAL,
    status TEXT NOT NULL DEFAULT 'queued', stage TEXT, cause TEXT,
    phase TEXT, step INTEGER DEFAULT 0, total_steps INTEGER, warmstart_steps INTEGER,
    reward REAL, best_reward REAL, last_event_at REAL, final TEXT,
    events_offset INTEGER NOT NULL DEFAULT 0, torn_lines INTEGER NOT NULL DEFAULT 0,
    dry_run_key TEXT, dry_run TEXT, group_id TEXT, seed INTEGER, arm TEXT
);
CREATE INDEX IF NOT EXISTS runs_group ON runs(group_id);
CREATE INDEX IF NOT EXISTS runs_dry_run ON runs(dry_run_key);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL, phase TEXT NOT NULL, step INTEGER NOT NULL, t REAL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, phase, step)
);
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, pos INTEGER NOT NULL, t REAL,
    level TEXT, message TEXT NOT NULL, UNIQUE (run_id, pos)
);
CREATE VIRTUAL TABLE IF NOT EXISTS logs_fts USING fts5(
    message, content='logs', content_rowid='id', tokenize='unicode61'
);
CREATE TRIGGER IF NOT EXISTS logs_ai AFTER INSERT ON logs BEGIN
    INSERT INTO logs_fts(rowid, message) VALUES (new.id, new.message);
END;
CREATE TABLE IF NOT EXISTS traces (
    run_id TEXT NOT NULL, phase TEXT NOT NULL, step INTEGER NOT NULL, idx INTEGER NOT NULL,
    grp INTEGER, prompt TEXT, completion TEXT, reward REAL, components TEXT, reference TEXT,
    rendered TEXT, trained TEXT, episode TEXT, reason TEXT,
    PRIMARY KEY (run_id, phase, step, idx)
);
CREATE TABLE IF NOT EXISTS measured (
    run_id TEXT PRIMARY KEY, shape TEXT NOT NULL, status TEXT, steps INTEGER,
    steady_step_s REAL, warm_step_s REAL, startup_s REAL, peak_memory_gb REAL, ended_at REAL
);
CREATE INDEX IF NOT EXISTS measured_shape ON measured(shape);
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, path TEXT NOT NULL, t REAL,
    PRIMARY KEY (run_id, path)
);
"""


class Store(Queries):
    """A connection per thread (WAL lets readers and the writer overlap); safe to share."""

    def __init__(self, path: Path | None = None, root: Path | None = None) -> None:
        self.root = root or runs_root()
        self.path = path or home() / "index.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self.rebuilt_because: str | None = None
        self.read_only = False
        self._create_schema()

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(
                self.path, check_same_thread=False, timeout=30, isolation_level=None
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.OperationalError:
            if not self.path.exists():
                raise
            # A read-only (or full) disk: read the index as it is, without WAL files.
            db = sqlite3.connect(
                f"file:{self.path}?mode=ro&immutable=1",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
            self.read_only = True
        db.row_factory = sqlite3.Row
        return db

    def _create_schema(self) -> None:
        """Open (or create) the index; one of another format, or corrupted, is set aside and
        rebuilt from the run directories: it is only a cache of them. One opener at a time
        (threads and processes): a second one switching a half-made file to WAL meanwhile
        saw "locked", took the disk for read-only, and failed."""
        with _exclusive(self.path.with_name(self.path.name + ".lock")):
            self._create_schema_locked()

    def _create_schema_locked(self) -> None:
        try:
            db = self._connect()
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
        except sqlite3.DatabaseError as exc:  # "file is not a database", a torn page...
            self._set_aside(f"corrupt ({exc})")
            db = self._connect()
            version = 0
        if version not in (0, SCHEMA_VERSION):  # an index of another format: start over
            db.close()
            self._set_aside(f"format {version}")
            db = self._connect()
        try:
            db.executescript(SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.OperationalError:
            if version != SCHEMA_VERSION:
                raise  # an index that cannot be created cannot be read either
            self.read_only = True  # the schema is there; writes will fail and be reported
        finally:
            db.close()

    def _set_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            old = self.path.with_name(self.path.name + suffix)
            if old.exists():
                old.replace(old.with_name(f"{old.name}.bad-{stamp}"))
        self.rebuilt_because = why

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection. A read-only fallback connection is opened afresh on
        every use, so the index is writable again as soon as the disk is."""
        db = getattr(self._local, "db", None)
        if db is None or getattr(self._local, "read_only", False):
            if db is not None:
                db.close()
                with self._lock:
                    self._connections.remove(db)
            self.read_only = False
            db = self._local.db = self._connect()
            self._local.read_only = self.read_only
            with self._lock:
                self._connections.append(db)
        return db

    # -- ingestion -----------------------------------------------------------------------
    def sync(self, run_ids: Iterable[str] | None = None) -> None:
        """Ingest new events of the given runs (default: every run directory)."""
        if run_ids is None:
            dirs = (
                [p for p in self.root.iterdir() if (p / RUN_META).is_file()]
                if (self.root.is_dir())
                else []
            )
        else:
            dirs = [self.root / r for r in run_ids if (self.root / r / RUN_META).is_file()]
        known = {
            r["run_id"]: r
            for r in self.db.execute("SELECT run_id, status, events_offset FROM runs")
        }
        for d in dirs:
            row = known.get(d.name)
            size = _size(d / EVENTS)
            if (
                row is not None
                and row["events_offset"] >= size
                and (row["status"] in FINAL_STATUSES or size == 0)
            ):
                continue  # nothing new
            try:
                self.ingest(d)
            except (sqlite3.InterfaceError, sqlite3.IntegrityError, ValueError, TypeError):
                # one run's odd data must never break the listing of every other run
                log.warning("could not index run %s; it is left out", d.name, exc_info=True)

    def ingest(self, run_dir: Path, final: bool = False) -> None:
        """Apply run_dir's events after the stored offset (creating the run row if new)."""
        known = self.db.execute(
            "SELECT events_offset FROM runs WHERE run_id=?", (run_dir.name,)
        ).fetchone()
        if known is not None and not final and _size(run_dir / EVENTS) <= known[0]:
            return  # nothing new: no write transaction
        with self._lock:
            # The offset is read inside the write transaction, so two processes ingesting the
            # same run cannot both apply the same events.
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute(
                    "SELECT * FROM runs WHERE run_id=?", (run_dir.name,)
                ).fetchone()
                if row is None:
                    self._insert_run(run_dir)
                    row = self.db.execute(
                        "SELECT * FROM runs WHERE run_id=?", (run_dir.name,)
                    ).fetchone()
                batch = read_events(run_dir / EVENTS, row["events_offset"], final=final)
                state = dict(row)
                for pos, event in batch.events:
                    self._apply(state, run_dir, pos, event)
                state["events_offset"] = batch.offset
                state["torn_lines"] += len(batch.torn)
                for pos in batch.torn:
                    self._log(
                        state["run_id"],
                        pos,
                        time.time(),
                        "warning",
                        f"skipped a torn event line at byte {pos} of {EVENTS}",
                    )
                if state["status"] in FINAL_STATUSES and row["status"] not in FINAL_STATUSES:
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        record(self.db, state, run_dir)  # odd metrics: no measurement
                cols = [c for c in state if c != "run_id"]
                self.db.execute(
                    f"UPDATE runs SET {', '.join(f'{c}=?' for c in cols)} WHERE run_id=?",
                    [bindable(state[c]) for c in cols] + [state["run_id"]],
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _insert_run(self, run_dir: Path) -> None:
        meta = read_json(run_dir / RUN_META)
        spec = read_json(run_dir / SPEC)
        algorithm = spec.get("algorithm", {})
        warmstart = algorithm.get("warmstart") or {}
        stand_in = bool((spec.get("model") or {}).get("stand_in"))
        values = (
            run_dir.name,
            meta.get("spec_id"),
            spec.get("name"),
            meta.get("backend"),
            spec.get("model", {}).get("name"),
            algorithm.get("kind"),
            str(run_dir),
            meta.get("created_at"),
            algorithm.get("steps"),
            warmstart.get("steps"),
            dry_run_key(spec) if stand_in else None,
            meta.get("group_id"),
            algorithm.get("seed"),
            meta.get("arm"),
        )
        self.db.execute(
            "INSERT OR IGNORE INTO runs (run_id, spec_id, name, backend, model, kind, run_dir, "
            "created_at, total_steps, warmstart_steps, dry_run_key, group_id, seed, arm) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [bindable(v) for v in values],
        )

    def _apply(self, s: dict[str, Any], run_dir: Path, pos: int, e: dict[str, Any]) -> None:
        kind, t = e.get("type"), e.get("t")
        s["last_event_at"] = max(s.get("last_event_at") or 0, t or 0)
        if kind == "stage":
            s["stage"] = e.get("stage")
            s["started_at"] = s.get("started_at") or t
            if s["status"] == "queued":
                s["status"] = "running"
        elif kind == "metrics":
            phase, step = e.get("phase", "train"), int(e.get("step", 0))
            data = {k: v for k, v in e.items() if k not in ("type", "t", "phase", "step")}
            self.db.execute(
                "INSERT OR REPLACE INTO metrics VALUES (?,?,?,?,?)",
                (s["run_id"], phase, step, t, json.dumps(data)),
            )
            s["phase"], s["step"] = phase, step
            if phase == "train" and isinstance(e.get("reward"), int | float):
                s["reward"] = e["reward"]
                best = s["best_reward"]
                s["best_reward"] = e["reward"] if best is None else max(best, e["reward"])
        elif kind == "heldout":  # a point of the held-out curve: not the run's step
            data = {k: v for k, v in e.items() if k not in ("type", "t", "step")}
            self.db.execute(
                "INSERT OR REPLACE INTO metrics VALUES (?,?,?,?,?)",
                (s["run_id"], "heldout", int(e.get("step", 0)), t, json.dumps(data)),
            )
        elif kind == "log":
            self._log(s["run_id"], pos, t, e.get("level", "info"), str(e.get("message", "")))
        elif kind == "trace":
            self._ingest_trace(s["run_id"], run_dir, e)
        elif kind == "checkpoint":
            self.db.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?,?,?,?)",
                (s["run_id"], e.get("step"), e.get("path"), t),
            )
        elif kind == "dry_run":
            s["dry_run"] = json.dumps({k: v for k, v in e.items() if k not in ("type", "t")})
        elif kind == "error":
            s["cause"] = e.get("cause")
            self._log(s["run_id"], pos, t, "error", f"{e.get('cause')}\n{e.get('traceback', '')}")
        elif kind == "result":
            s["status"] = e.get("status", "failed")
            s["stage"] = s["status"]  # the last stage of every run is how it ended
            s["cause"] = e.get("cause") or s.get("cause")
            s["ended_at"] = t
            s["final"] = json.dumps(e.get("final") or {})
            self._log(
                s["run_id"],
                pos,
                t,
                "info" if s["status"] == "succeeded" else "error",
                f"run {s['status']}" + (f": {s['cause']}" if s["cause"] else ""),
            )

    def _log(self, run_id: str, pos: int, t: float | None, level: str, message: str) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO logs (run_id, pos, t, level, message) VALUES (?,?,?,?,?)",
            (run_id, pos, t, level, message),
        )

    def _ingest_trace(self, run_id: str, run_dir: Path, e: dict[str, Any]) -> None:
        path = run_dir / str(e.get("path", ""))
        if run_dir.resolve() not in path.resolve().parents:
            return  # a trace path must stay inside its run directory
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return
        phase = e.get("phase", "train")
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if not isinstance(r, dict):
                continue
            reward = r.get("reward")
            self.db.execute(
                "INSERT OR REPLACE INTO traces VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    bindable(phase),
                    bindable(r.get("step")),
                    bindable(r.get("idx")),
                    bindable(r.get("group")),
                    bindable(r.get("prompt")),
                    bindable(r.get("completion")),
                    reward if isinstance(reward, int | float) else None,
                    json.dumps(r.get("components") or {}, default=str),
                    bindable(r.get("reference")),
                    bindable(r.get("rendered")),
                    bindable(r.get("trained")),
                    json.dumps(r["episode"], default=str) if r.get("episode") else None,
                    bindable(r.get("reason")),
                ),
            )

    def rebuild(self) -> None:
        """Forget the index and read every run directory again."""
        with self._lock:
            for table in ("runs", "metrics", "logs", "traces", "checkpoints", "measured"):
                self.db.execute(f"DELETE FROM {table}")
            self.db.execute("INSERT INTO logs_fts(logs_fts) VALUES ('rebuild')")
        self.sync()

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock on a file beside the index (none where it cannot be made:
    a read-only disk has no writers to wait for)."""
    try:
        handle = lock_path.open("a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def bindable(value: Any) -> Any:
    """A value SQLite binds: numbers, text and None as they are; any other JSON value (a
    dict in a reference column, a list) as its JSON text."""
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
