"""Reading the index: runs, metrics, logs (FTS5), traces, checkpoints, dry runs and the step
times finished runs measured. Mixed into posttrain.runs.store.Store, which writes it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from posttrain.runs.run_row import RunRow


class Queries:
    """The index's read side; `db` is the calling thread's connection."""

    db: sqlite3.Connection

    def get(self, run_id: str) -> RunRow | None:
        row = self.db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return RunRow.from_sql(row) if row else None

    def list_runs(
        self, status: str | None = None, since: float | None = None, limit: int = 50
    ) -> list[RunRow]:
        sql, args = "SELECT * FROM runs WHERE 1=1", []
        if status:
            sql, args = sql + " AND status=?", [*args, status]
        if since:
            sql, args = sql + " AND created_at>=?", [*args, since]
        sql += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
        return [RunRow.from_sql(r) for r in self.db.execute(sql, [*args, limit])]

    def metrics(self, run_id: str, phase: str | None = "train") -> list[dict[str, Any]]:
        sql = "SELECT phase, step, t, data FROM metrics WHERE run_id=?"
        args: list[Any] = [run_id]
        if phase:
            sql, args = sql + " AND phase=?", [*args, phase]
        rows = self.db.execute(sql + " ORDER BY phase, step", args)
        return [
            {"phase": r["phase"], "step": r["step"], "t": r["t"], **json.loads(r["data"])}
            for r in rows
        ]

    def logs(
        self,
        run_id: str,
        *,
        after: int | None = None,
        tail: int | None = None,
        search: str | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        """Log lines in order. `after`: a cursor (pos) from an earlier call; `tail`: the last
        N; `search`: FTS5 query over messages (words are ANDed; quotes for phrases)."""
        args: list[Any] = [run_id]
        sql = "SELECT logs.pos, logs.t, logs.level, logs.message FROM logs"
        if search:
            sql += (
                " JOIN logs_fts ON logs_fts.rowid = logs.id WHERE logs.run_id=? AND "
                "logs_fts MATCH ?"
            )
            args.append(fts_query(search))
        else:
            sql += " WHERE logs.run_id=?"
        if after is not None:
            sql, args = sql + " AND logs.pos>?", [*args, after]
        if tail:
            sql = f"SELECT * FROM ({sql} ORDER BY logs.pos DESC LIMIT ?) ORDER BY pos"
            args.append(min(tail, limit))
        else:
            sql, args = sql + " ORDER BY logs.pos LIMIT ?", [*args, limit]
        return [dict(r) for r in self.db.execute(sql, args)]

    def traces(
        self, run_id: str, steps: Iterable[int] | None = None, phase: str = "train"
    ) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM traces WHERE run_id=? AND phase=?", [run_id, phase]
        if steps is not None:
            steps = list(steps)
            sql += f" AND step IN ({','.join('?' * len(steps))})"
            args += steps
        rows = self.db.execute(sql + " ORDER BY step, idx", args)
        return [
            {
                **dict(r),
                "components": json.loads(r["components"] or "{}"),
                "episode": json.loads(r["episode"]) if r["episode"] else None,
            }
            for r in rows
        ]

    def trace_steps(self, run_id: str, phase: str = "train") -> list[int]:
        rows = self.db.execute(
            "SELECT DISTINCT step FROM traces WHERE run_id=? AND phase=? ORDER BY step",
            (run_id, phase),
        )
        return [r[0] for r in rows]

    def last_dry_run(self, key: str) -> dict[str, Any] | None:
        """The newest succeeded dry run with this dry-run key, or None."""
        row = self.db.execute(
            "SELECT run_id, ended_at FROM runs WHERE dry_run_key=? AND status='succeeded' "
            "ORDER BY ended_at DESC LIMIT 1",
            (key,),
        ).fetchone()
        return dict(row) if row else None

    def group_runs(self, group_id: str) -> list[str]:
        """A group's runs, in seed order."""
        rows = self.db.execute(
            "SELECT run_id FROM runs WHERE group_id=? ORDER BY seed, run_id", (group_id,)
        )
        return [r[0] for r in rows]

    def train_rewards(self, run_id: str, first: int, last: int) -> list[tuple[str, float]]:
        """(prompt, reward) of each traced training completion from step `first` to `last`."""
        rows = self.db.execute(
            "SELECT prompt, reward FROM traces WHERE run_id=? AND phase='train' AND step>=? "
            "AND step<=? AND reward IS NOT NULL AND prompt IS NOT NULL ORDER BY step, idx",
            (run_id, first, last),
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    def open_groups(self) -> list[str]:
        """The groups with a run not yet final (where an experiment may hold queued runs)."""
        rows = self.db.execute(
            "SELECT DISTINCT group_id FROM runs WHERE group_id IS NOT NULL "
            "AND status NOT IN ('succeeded', 'failed', 'cancelled')"
        )
        return [r[0] for r in rows]

    def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT step, path, t FROM checkpoints WHERE run_id=? ORDER BY step", (run_id,)
        )
        return [dict(r) for r in rows]

    def measured(self, shape: dict[str, Any], limit: int = 20) -> list[dict[str, Any]]:
        """Runs of this shape that succeeded after at least 3 steps, newest first. A failed or
        cancelled run never becomes the measurement: its steps may have been slowed by what
        stopped it (a contended CPU, a dying machine)."""
        rows = self.db.execute(
            "SELECT * FROM measured WHERE shape=? AND steps>=3 AND status='succeeded' "
            "ORDER BY ended_at DESC LIMIT ?",
            (json.dumps(shape, sort_keys=True), limit),
        )
        return [{**dict(r), "shape": json.loads(r["shape"])} for r in rows]


def fts_query(text: str) -> str:
    """User text as an FTS5 query: each word quoted (so '-', ':' and quotes are literal)."""
    words = [w.replace('"', '""') for w in text.split()]
    return " ".join(f'"{w}"' for w in words) or '""'
