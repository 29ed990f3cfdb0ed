"""Run rows built by hand, for code that reads a run's index row without a run behind it
(a projection, a cost): the real type, so a renamed column fails here as it would in use."""

from __future__ import annotations

from typing import Any

from posttrain.runs.run_row import RunRow


def run_row(run_id: str = "run-test-0001", **columns: Any) -> RunRow:
    """A RunRow with the columns given; `run_dir` defaults to a folder named after the run."""
    return RunRow(
        run_id=run_id, run_dir=columns.pop("run_dir", f"/nonexistent/{run_id}"), **columns
    )
