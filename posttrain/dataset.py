"""Reading dataset rows from local files (JSONL, JSON, Parquet, CSV)."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError, NotFoundError

FORMATS = (".jsonl", ".json", ".parquet", ".csv")


def read_rows(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a local dataset file as dicts; errors name the file, the line and the fix."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise NotFoundError(f"dataset file {path} does not exist; give a path to a {FORMATS} file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"dataset file {path} line {number}: not valid JSON ({exc.msg}); "
                        f"each line must be one JSON object"
                    ) from None
                if not isinstance(row, dict):
                    raise ConfigError(
                        f"dataset file {path} line {number}: a {type(row).__name__}, "
                        f"not a JSON object"
                    )
                rows.append(row)
                if limit is not None and len(rows) >= limit:
                    break
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"dataset file {path}: not valid JSON ({exc})") from None
        if isinstance(data, dict):  # {"rows": [...]} or {"data": [...]}
            data = data.get("rows", data.get("data"))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ConfigError(f"dataset file {path}: expected a JSON list of objects")
        return data[:limit] if limit is not None else data
    if suffix == ".parquet":
        import pyarrow.parquet

        try:
            rows = pyarrow.parquet.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise ConfigError(f"dataset file {path}: not a readable Parquet file ({exc})") from None
        return rows[:limit] if limit is not None else rows
    if suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(itertools.islice(csv.DictReader(f), limit))
        return rows
    raise ConfigError(f"dataset file {path}: unknown format '{suffix}'; use one of {FORMATS}")
