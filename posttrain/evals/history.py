"""Every evaluation of a run, kept and listed.

evaluate stores each result as evaluations/eval-<local time>-<microseconds>.json, and never
over another (two in one second, or two processes at once, get two files); get_run lists them
all; and a new evaluation of a run evaluated before says so, with the earlier verdicts:
evaluating again until one says "improved" is not evidence, and the list shows it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from posttrain.core.secrets import redact_value
from posttrain.runs.layout import EventWriter

FOLDER = "evaluations"
SHOWN_VERDICTS = 8  # earlier verdicts a warning names; the rest are counted


def store(run_dir: Path, result: Any) -> Any:
    """Keep an EvalResult with the run under a name no other evaluation has, and say so in its
    events; `result.path` is set to the file, relative to the run directory."""
    folder = run_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    for micro in range(int(now % 1 * 1e6), 1_000_000):  # a taken name: the next microsecond
        name = f"eval-{stamp}-{micro:06d}.json"
        result.path = f"{FOLDER}/{name}"
        if _write_new(folder / name, result.model_dump(mode="json")):
            break
    else:
        raise FileExistsError(f"every evaluation name of second {stamp} is taken in {folder}")
    events = EventWriter(run_dir)
    events.write("evaluation", durable=True, path=result.path, verdict=result.verdict)
    events.close()
    return result


def _write_new(path: Path, data: dict[str, Any]) -> bool:
    """Write the JSON whole to `path` unless something is there already (False then): a hard
    link of a finished temporary file, so a reader never sees half of it, and it never
    replaces another evaluation."""
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False, encoding="utf-8"
    ) as f:
        f.write(json.dumps(redact_value(data), indent=2, default=str))
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(f.name, path)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f.name)


def stored(run_dir: Path) -> list[dict[str, Any]]:
    """Every stored evaluation of a run, in full, oldest first (a file that cannot be read is
    left out: it is not an evaluation anyone can stand on)."""
    found = []
    for path in sorted((run_dir / FOLDER).glob("eval-*.json")):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and "verdict" in data:
                data.setdefault("path", f"{FOLDER}/{path.name}")
                found.append(data)
    return sorted(found, key=lambda d: (d.get("created_at") or 0, d["path"]))


def latest(run_dir: Path) -> dict[str, Any] | None:
    """The newest stored evaluation of a run, or None (its name says when: only it is read)."""
    for path in sorted((run_dir / FOLDER).glob("eval-*.json"), reverse=True):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and "verdict" in data:
                return data
    return None


def listed(run_dir: Path) -> list[dict[str, Any]]:
    """Each stored evaluation of a run in a line: its file, when, what it evaluated (the run,
    or the group or experiment arm it was part of), the verdict and the tasks it used."""
    return [
        {
            "path": e["path"],
            "created_at": e.get("created_at"),
            "evaluated": e.get("run_id"),
            "verdict": e["verdict"],
            "tasks_used": e.get("tasks_used"),
        }
        for e in stored(run_dir)
    ]


def evaluated_before(run_dirs: list[Path]) -> str | None:
    """The warning a new evaluation of these runs carries when any was evaluated before,
    naming the earlier verdicts (one per evaluation: a group's is stored with each seed)."""
    seen: dict[tuple[Any, Any], str] = {}
    for run_dir in run_dirs:
        for e in stored(run_dir):
            seen.setdefault((e.get("run_id"), e.get("created_at")), e["verdict"])
    if not seen:
        return None
    verdicts = [seen[key] for key in sorted(seen, key=lambda key: key[1] or 0)]
    shown = ", ".join(verdicts[:SHOWN_VERDICTS])
    if len(verdicts) > SHOWN_VERDICTS:
        shown += f" and {len(verdicts) - SHOWN_VERDICTS} more"
    times = "once" if len(verdicts) == 1 else f"{len(verdicts)} times"
    return (
        f"evaluated {times} before: {shown}: re-evaluating until it says improved is not "
        f"evidence; report every evaluation (get_run lists them), not the best"
    )


def keep(run_dirs: list[Path], result: Any) -> Any:
    """Store a new evaluation of these runs with each, after adding the warning that they
    were evaluated before (when they were)."""
    warning = evaluated_before(run_dirs)
    if warning:
        result.warnings.insert(0, warning)
    for run_dir in run_dirs:
        store(run_dir, result)
    return result
