"""Money: the budget policy, confirmation tokens, the spend ledger and idempotency keys.

Policy (environment, else $POSTTRAIN_HOME/config.yaml `budget:`):
  POSTTRAIN_AUTO_APPROVE_USD  launches whose worst case is at most this start unasked (0)
  POSTTRAIN_MAX_RUN_USD       no run's worst case may exceed this, whatever was approved (25)
  POSTTRAIN_MAX_DAY_USD       worst cases reserved in one UTC day may not exceed this (100)

The ledger is a small SQLite file. Claiming the idempotency key, consuming a token, checking
the caps, reserving the spend and creating the run folder happen in one IMMEDIATE
transaction (`reserve`), so two launches racing for one key start one run and two racing
for the same budget cannot pass a cap together; the backend starts the work afterwards,
outside the lock (posttrain.runs.backend). Tokens are stored only as hashes.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posttrain.core.errors import BudgetError, ConfigError
from posttrain.core.paths import home

TOKEN_TTL_S = 15 * 60
SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY, spec_id TEXT NOT NULL, worst_case_usd REAL NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, used_at REAL, run_id TEXT
);
CREATE TABLE IF NOT EXISTS spend (
    run_id TEXT PRIMARY KEY, spec_id TEXT, day TEXT NOT NULL, reserved_usd REAL NOT NULL,
    approved_by TEXT, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS launches (
    idempotency_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, spec_id TEXT, created_at REAL
);
CREATE TABLE IF NOT EXISTS launch_order (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, created_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Reservation:
    run_id: str  # the first (or only) run
    existing: bool  # True: the key already belonged to a run that still counts
    seq: int = 0  # launch order, for the local queue
    run_ids: tuple[str, ...] = ()  # every run reserved (a group has several)


@dataclass(frozen=True)
class BudgetPolicy:
    auto_approve_usd: float = 0.0
    max_run_usd: float = 25.0
    max_day_usd: float = 100.0

    def __post_init__(self) -> None:
        for name in ("auto_approve_usd", "max_run_usd", "max_day_usd"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:  # Infinity would be no cap at all
                raise ConfigError(
                    f"budget {name} is {value}: give a finite number of dollars, 0 or more "
                    f"(config.yaml budget.{name} or POSTTRAIN_{name.upper()})"
                )

    @classmethod
    def load(cls) -> BudgetPolicy:
        values: dict[str, float] = {}
        config = home() / "config.yaml"
        if config.is_file():
            import yaml

            try:
                data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"{config} is not valid YAML: {exc}") from None
            budget = data.get("budget") if isinstance(data, dict) else None
            if budget is not None and not isinstance(budget, dict):
                raise ConfigError(
                    f"{config}: budget must be a mapping, e.g. budget: {{max_run_usd: 25}}"
                )
            for k, v in (budget or {}).items():
                if k not in cls.__dataclass_fields__:
                    continue
                try:
                    values[k] = float(v)
                except (TypeError, ValueError):
                    raise ConfigError(
                        f"{config}: budget.{k} is {str(v)[:40]!r}, not a number of dollars"
                    ) from None
        for field, env in (
            ("auto_approve_usd", "POSTTRAIN_AUTO_APPROVE_USD"),
            ("max_run_usd", "POSTTRAIN_MAX_RUN_USD"),
            ("max_day_usd", "POSTTRAIN_MAX_DAY_USD"),
        ):
            if os.environ.get(env):
                try:
                    values[field] = float(os.environ[env])
                except ValueError:
                    raise ConfigError(
                        f"{env}={os.environ[env]!r} is not a number of dollars"
                    ) from None
        return cls(**values)


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Ledger:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or home() / "budget.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        db.executescript(SCHEMA)
        db.close()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def existing(self, key: str) -> str | None:
        """The run that holds an idempotency key, if any (whether it still counts is the
        caller's to judge: posttrain.tools.launch)."""
        db = self._connect()
        try:
            row = db.execute(
                "SELECT run_id FROM launches WHERE idempotency_key=?", (key,)
            ).fetchone()
            return row["run_id"] if row else None
        finally:
            db.close()

    def issue_token(self, spec_id: str, worst_case_usd: float) -> tuple[str, float]:
        token = "pt-confirm-" + secrets.token_urlsafe(18)
        now = time.time()
        db = self._connect()
        try:
            db.execute(
                "INSERT INTO tokens VALUES (?,?,?,?,?,NULL,NULL)",
                (_hash(token), spec_id, worst_case_usd, now, now + TOKEN_TTL_S),
            )
        finally:
            db.close()
        return token, now + TOKEN_TTL_S

    def _check_token(
        self, db: sqlite3.Connection, token: str, spec_id: str, worst_case_usd: float
    ) -> None:
        row = db.execute("SELECT * FROM tokens WHERE token_hash=?", (_hash(token),)).fetchone()
        if row is None:
            raise BudgetError(
                "confirmation token is not one this server issued; launch again "
                "without it to get a new one"
            )
        if row["used_at"] is not None:
            raise BudgetError(
                f"confirmation token was already used (run {row['run_id']}); a token starts one run"
            )
        if time.time() > row["expires_at"]:
            raise BudgetError(
                "confirmation token has expired (tokens last 15 minutes); launch "
                "again to get a new one and ask your human again"
            )
        if row["spec_id"] != spec_id:
            raise BudgetError(
                "confirmation token was issued for a different spec: the spec "
                "changed since your human approved it, so ask again"
            )
        if worst_case_usd > row["worst_case_usd"] + 1e-9:
            raise BudgetError(
                f"the cost rose since approval (${row['worst_case_usd']:.2f} -> "
                f"${worst_case_usd:.2f}); ask your human again"
            )

    def check_caps(
        self,
        policy: BudgetPolicy,
        worst_case_usd: float,
        db: sqlite3.Connection | None = None,
        total: float | None = None,
    ) -> None:
        """The per-run cap on `worst_case_usd` (one run's), the daily cap on `total` (a
        group's, else the run's)."""
        total = worst_case_usd if total is None else total
        if worst_case_usd > policy.max_run_usd:
            raise BudgetError(
                f"refused: the worst case ${worst_case_usd:.2f} exceeds the per-run cap "
                f"${policy.max_run_usd:.2f} (POSTTRAIN_MAX_RUN_USD), whatever was approved; "
                f"lower compute.timeout_s or use a cheaper GPU"
            )
        own = db is None
        db = db or self._connect()
        try:
            spent = float(
                db.execute(
                    "SELECT COALESCE(SUM(reserved_usd), 0) FROM spend WHERE day=?", (today(),)
                ).fetchone()[0]
            )
        finally:
            if own:
                db.close()
        if spent + total > policy.max_day_usd:
            raise BudgetError(
                f"refused: ${spent:.2f} is already reserved today and this launch's worst case "
                f"${total:.2f} would pass the daily cap ${policy.max_day_usd:.2f} "
                f"(POSTTRAIN_MAX_DAY_USD)"
            )

    def reserve(
        self,
        *,
        policy: BudgetPolicy,
        key: str | None,
        spec_id: str,
        worst_case_usd: float,
        approved_by: str,
        create: Callable[[int], str],
        still_counts: Callable[[str], bool],
        token: str | None = None,
        runs: int = 1,
    ) -> Reservation:
        """Claim the key, consume the token, check the caps, reserve the spend and create the
        runs (`create(seq)` makes one run's folder and returns its id; called `runs` times,
        for a group): all or nothing, one at a time. A key held by a run that `still_counts`
        returns that run instead. `worst_case_usd` is the total, shared evenly by the runs."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                held = db.execute(
                    "SELECT run_id FROM launches WHERE idempotency_key=?", (key,)
                ).fetchone()
                if key is not None and held is not None and still_counts(held["run_id"]):
                    db.execute("ROLLBACK")
                    return Reservation(held["run_id"], existing=True)
                if worst_case_usd > 0:
                    self.check_caps(policy, worst_case_usd / runs, db, total=worst_case_usd)
                if token is not None:
                    self._check_token(db, token, spec_id, worst_case_usd)
                now = time.time()
                ids, seqs = [], []
                for _ in range(runs):
                    seq = int(
                        db.execute(
                            "INSERT INTO launch_order (run_id, created_at) VALUES ('', ?)", (now,)
                        ).lastrowid
                        or 0
                    )
                    run_id = create(seq)
                    db.execute("UPDATE launch_order SET run_id=? WHERE seq=?", (run_id, seq))
                    db.execute(
                        "INSERT INTO spend VALUES (?,?,?,?,?,?)",
                        (run_id, spec_id, today(), worst_case_usd / runs, approved_by, now),
                    )
                    ids.append(run_id)
                    seqs.append(seq)
                if token is not None:
                    db.execute(
                        "UPDATE tokens SET used_at=?, run_id=? WHERE token_hash=?",
                        (now, ids[0], _hash(token)),
                    )
                if key is not None:
                    db.execute(
                        "INSERT OR REPLACE INTO launches VALUES (?,?,?,?)",
                        (key, ids[0], spec_id, now),
                    )
                db.execute("COMMIT")
                return Reservation(ids[0], existing=False, seq=seqs[0], run_ids=tuple(ids))
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        finally:
            db.close()

    def release(self, run_id: str) -> None:
        """A run that never started: its spend is not reserved any more and its key is free."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "UPDATE spend SET reserved_usd=0, approved_by=approved_by || ' (released)' "
                "WHERE run_id=?",
                (run_id,),
            )
            db.execute("DELETE FROM launches WHERE run_id=?", (run_id,))
            db.execute("COMMIT")
        finally:
            db.close()

    def reserve_spend(
        self,
        *,
        policy: BudgetPolicy,
        spend_id: str,
        worst_case_usd: float,
        approved_by: str,
        token: str | None = None,
    ) -> None:
        """Reserve a spend that is not a run (an evaluation on Modal): caps, token, record."""
        self.reserve(
            policy=policy,
            key=None,
            spec_id=spend_id,
            worst_case_usd=worst_case_usd,
            approved_by=approved_by,
            create=lambda seq: f"{spend_id}#{seq}",
            still_counts=lambda run_id: False,
            token=token,
        )
