"""A small JSONL file the user wrote (probes, labels), read line by line: every error names
the file, the line and the shape each line must have."""

from __future__ import annotations

import json
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.paths import expand, is_file


def jsonl_objects(
    path: str, what: str, keys: tuple[str, ...], shape: str
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of `what` (e.g. "probes file"), each an
    object holding `keys`; `shape` is an example line, shown with every error."""
    file = expand(path)
    if not is_file(file):
        raise ConfigError(f"{what} {file} does not exist; give a .jsonl file of {shape} lines")
    found = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{what} {file} line {n}: not JSON ({exc})") from None
        missing = [k for k in keys if not isinstance(item, dict) or k not in item]
        if missing:
            raise ConfigError(f"{what} {file} line {n}: missing {missing}; each line is {shape}")
        found.append((n, item))
    return found
