"""The judge's cache: a judged answer is never paid for twice.

Keyed by the judge (endpoint and model), the rubric, the prompt, the mode and the answer (for
group mode, the whole group: its scores are relative to each other, so the same answer in
another group is judged again). SQLite in $POSTTRAIN_HOME, shared by every process: a
trainer's reward calls, check_reward and evaluate. Only readable verdicts are kept, so a
reply the judge botched is asked again next time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from posttrain.core.paths import home

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY, scores TEXT NOT NULL, reasons TEXT NOT NULL, at REAL NOT NULL
);
"""


def cache_key(
    judge: str,
    rubric: str,
    prompt: str,
    answers: list[str],
    mode: str,
    reference: str | None = None,
) -> str:
    parts: list[Any] = [judge, rubric, prompt, answers, mode]
    if reference is not None:  # a judge shown the reference may judge otherwise
        parts.append(reference)
    text = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or home() / "judge_cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)
        self.hits = self.misses = 0
        self._count = threading.Lock()  # judged a few at a time: the counts stay exact

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def get(self, key: str) -> tuple[list[float | None], list[str | None]] | None:
        with self._connect() as db:
            row = db.execute("SELECT scores, reasons FROM verdicts WHERE key=?", (key,)).fetchone()
        with self._count:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        if row is None:
            return None
        return json.loads(row[0]), json.loads(row[1])

    def put(self, key: str, scores: list[Any], reasons: list[Any]) -> None:
        if not any(s is not None for s in scores):
            return  # nothing readable: ask again next time
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO verdicts (key, scores, reasons, at) VALUES (?,?,?,?)",
                (key, json.dumps(scores), json.dumps(reasons), time.time()),
            )
