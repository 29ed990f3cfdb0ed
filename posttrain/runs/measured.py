"""What finished runs measured: steady seconds per step, start-up and peak memory, keyed by
the run's shape, so the next estimate of that shape starts from them (pricing/estimate.py).
Written when the index sees a run end; rebuilt with the index."""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

from posttrain.runs.layout import SPEC, read_json
from posttrain.spec.keys import shape_key


def record(db: sqlite3.Connection, s: dict[str, Any], run_dir: Path) -> None:
    """A finished run's steady step time, start-up and peak memory, keyed by its shape,
    for the next estimate of that shape (posttrain.pricing.estimate)."""
    rows = db.execute(
        "SELECT phase, step, t, data FROM metrics WHERE run_id=? ORDER BY phase, step",
        (s["run_id"],),
    ).fetchall()
    train = [(r["t"], json.loads(r["data"])) for r in rows if r["phase"] == "train"]
    warm = [json.loads(r["data"]) for r in rows if r["phase"] == "warmstart"]
    if not train:
        return
    times = [d["step_time_s"] for _, d in train if d.get("step_time_s")]
    steady = times[2:] if len(times) >= 5 else times[1:] or times  # past the warm-up
    first = min(rows, key=lambda r: r["t"] or 0)
    first_step = json.loads(first["data"]).get("step_time_s") or 0
    startup = (
        first["t"] - first_step - s["created_at"] if s.get("created_at") and first["t"] else None
    )
    memory = [d["peak_memory_gb"] for _, d in train if d.get("peak_memory_gb")]
    warm_times = [d["step_time_s"] for d in warm if d.get("step_time_s")]
    db.execute(
        "INSERT OR REPLACE INTO measured VALUES (?,?,?,?,?,?,?,?,?)",
        (
            s["run_id"],
            json.dumps(shape_key(read_json(run_dir / SPEC)), sort_keys=True),
            s["status"],
            len(train),
            statistics.median(steady) if steady else None,
            statistics.median(warm_times[1:] or warm_times) if warm_times else None,
            max(0.0, startup) if startup is not None else None,
            max(memory) if memory else None,
            s.get("ended_at"),
        ),
    )
