"""A run's index row is a typed, frozen RunRow: read from real SQLite with its columns' types,
and still read when the table has gained or lacks a column."""

import dataclasses
import json

import pytest

from posttrain.runs.context import Context
from posttrain.runs.run_row import RunRow
from posttrain.runs.store import Store
from tests.runs.test_store import make_run


def test_a_row_read_from_the_index_is_a_run_row_with_its_columns_types(tmp_path, home):
    ctx = Context()
    d = make_run(ctx.root, steps=5)
    row = ctx.run(d.name)
    assert isinstance(row, RunRow)
    assert (row.run_id, row.spec_id, row.backend, row.model, row.kind) == (
        d.name,
        "abc",
        "local",
        "tiny-local",
        "grpo",
    )
    assert row.path == d and isinstance(row.run_dir, str)
    assert row.status == "succeeded" and row.is_final and row.stage == "succeeded"
    assert isinstance(row.step, int) and row.step == 5 and row.total_steps == 5
    assert isinstance(row.reward, float) and row.best_reward == 0.5
    assert isinstance(row.created_at, float) and isinstance(row.ended_at, float)
    assert isinstance(row.events_offset, int) and row.events_offset > 0
    assert row.torn_lines == 0 and json.loads(row.final or "") == {}
    assert (row.group_id, row.seed, row.arm, row.warmstart_steps) == (None, None, None, None)
    assert ctx.index.list_runs() == [row] and ctx.index.get(d.name) == row
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "running"  # type: ignore[misc]


def test_an_unknown_column_is_ignored_and_a_missing_one_takes_its_default():
    row = RunRow.from_sql(
        {"run_id": "run-a", "run_dir": "/runs/run-a", "status": "running", "gpu_hours": 3.5}
    )
    assert row == RunRow(run_id="run-a", run_dir="/runs/run-a", status="running")
    assert row.step == 0 and row.reward is None and row.backend_name == "local"
    assert not row.is_final
    assert RunRow.from_sql({"run_id": "run-a", "run_dir": "/r", "step": None}).step == 0
    assert RunRow.from_sql(dataclasses.asdict(row)) == row


def test_an_index_whose_table_gained_a_column_still_reads(tmp_path):
    root = tmp_path / "runs"
    d = make_run(root)
    store = Store(tmp_path / "index.sqlite", root=root)
    store.sync()
    store.db.execute("ALTER TABLE runs ADD COLUMN gpu_hours REAL DEFAULT 1.5")
    row = store.get(d.name)
    assert isinstance(row, RunRow) and row.status == "succeeded"
    assert not hasattr(row, "gpu_hours")
