"""The run directory: the source of truth for a run. Everything else is rebuilt from it.

    $POSTTRAIN_HOME/runs/<run_id>/
      run.json            the launch's plan and the backend's handle: run_id, spec_id,
                          backend, created_at, seq (launch order), status (reserved, then
                          submitted), idempotency_key, approved_by, the costs approved, base
                          (what training starts from, following resume chains) and resume
                          (the checkpoint it continues from), then the handle (pids locally,
                          a call id on Modal). The trainer and evaluate read base and resume
                          here. Rewritten atomically; never holds secrets.
      spec.json           the resolved RunSpec, written before the trainer starts
      events.jsonl        append-only, one JSON object per line, written by the trainer:
                            {"t": unix_s, "type": "stage",      "stage": "training"}
                            {"t": ..., "type": "metrics",       "phase": "train", "step": 12,
                                        "reward": .., "reward_std": .., "loss": .., "kl": ..,
                                        "completion_length": .., "step_time_s": ..,
                                        "tokens_per_s": .., "peak_memory_gb": ..,
                                        "components": {name: mean}}
                            {"t": ..., "type": "log",           "level": "info", "message": ..}
                            {"t": ..., "type": "trace",         "step": 12, "path": "traces/..",
                                        "n": 8}
                            {"t": ..., "type": "checkpoint",    "step": 50, "path": ".."}
                            {"t": ..., "type": "heartbeat",     "step": 12}
                            {"t": ..., "type": "proof_step",    "ok": true, "step_time_s": ..}
                            {"t": ..., "type": "dry_run",       "stand_in": .., "tokenizer": ..,
                                        "proved": [..], "cannot_prove": [..]}  (dry runs)
                            {"t": ..., "type": "result",        "status": "succeeded" |
                                        "failed" | "cancelled", "cause": .., "final": ..}
                            {"t": ..., "type": "error",         "cause": .., "traceback": ..}
      traces/step_0012.jsonl  sampled completions of step 12: prompt, rendered (the prompt as
                          the model read it), completion, reward, components, reference (one
                          JSON per line); eval_base_/eval_trained_step_*.jsonl: a dry run's
                          evaluation samples
      checkpoints/checkpoint-50/  the adapter (or weights) and optimizer state at step 50
      final/              the adapter (or weights) and tokenizer at the end
      warmstart/          the SFT warm-start model, when the spec asks for one
      holdout.jsonl       the held-out rows, kept out of training, for evaluate
      stdout.log          the trainer's own output (local backend)
      process.json        the local supervisor's pid, the trainer's pid and exit code
      cancel.request      present once someone asked the run to stop
      timeout.request     present once the run's timeout asked it to stop (the local
                          supervisor, or on Modal the run's own deadline: gpu/attempts.py)
      saving              present while a checkpoint or final/ is being written: a Volume
                          commit waits for it to go (a commit never holds half a checkpoint)
      starts.json         on Modal: when each start of the run's container began

A line is written with one append, so a reader sees whole lines; a process killed mid-write
can leave a torn last line, which readers skip and report and writers close with a newline.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.core.paths import RUN_ID, home
from posttrain.core.secrets import redact, redact_value, secret_values

EVENTS, RUN_META, SPEC, HOLDOUT = "events.jsonl", "run.json", "spec.json", "holdout.jsonl"
CANCEL_REQUEST, STDOUT, PROCESS = "cancel.request", "stdout.log", "process.json"
TIMEOUT_REQUEST = "timeout.request"  # compute.timeout_s has passed: stop after this step
SAVING = "saving"  # a checkpoint or final/ is being written
FINAL_STATUSES = ("succeeded", "failed", "cancelled")


def runs_root() -> Path:
    return home() / "runs"


def new_run_id() -> str:
    """run-YYMMDD-HHMMSS-xxxx: sorts by time, unique without coordination."""
    return time.strftime("run-%y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """A run id is a short slug: it never names a path outside the runs folder."""
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise ConfigError(
            f"run id {run_id!r} is not valid: run ids are lower-case letters, digits and "
            f"dashes (e.g. run-261130-120000-ab12); list runs with `posttrain run list`"
        )
    return run_id


def run_dir(run_id: str, root: Path | None = None, must_exist: bool = True) -> Path:
    path = (root or runs_root()) / check_run_id(run_id)
    if must_exist and not (path / RUN_META).is_file():
        raise NotFoundError(f"no run '{run_id}'; list runs with `posttrain run list`")
    return path


def billed_usd_per_s(meta: dict[str, Any]) -> float:
    """What a second of the run costs, from its run.json: its container's every charge (GPUs,
    CPU cores, memory), or, for a run launched before those were recorded, its GPUs'."""
    if meta.get("container_usd_per_s"):
        return float(meta["container_usd_per_s"])
    return float(meta.get("usd_per_s") or 0.0) * int(meta.get("gpu_count") or 1)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of either
    (secret values redacted)."""
    _write_atomic(path, json.dumps(redact_value(data), indent=2, default=str))


def write_rows_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write rows as JSON lines, whole or not at all: a reader that finds the file (the
    Modal backend copies a run's held-out rows once, on first sight) never finds half."""
    _write_atomic(path, "".join(json.dumps(row, default=str) + "\n" for row in rows))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False, encoding="utf-8"
    ) as f:  # hidden: a listing of the folder (a trace sync) passes it by
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(f.name, path)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file; {} when it is missing or damaged (never an exception: one
    broken run directory must not stop the others from being read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class EventWriter:
    """Appends events to events.jsonl, one whole line per write."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / EVENTS
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.last_write = 0.0
        self.secrets = secret_values()  # never written, whoever composed the event
        if _ends_mid_line(self.path):  # a torn line from a killed writer: close it off
            os.write(self._fd, b"\n")

    def write(self, type_: str, durable: bool = False, **fields: Any) -> dict[str, Any]:
        event = {"t": round(time.time(), 3), "type": type_, **fields}
        if self.secrets:  # on the values, before escaping can hide a secret from the mask
            event = redact_value(event, self.secrets)
        line = json.dumps(event, default=_jsonable, separators=(",", ":")) + "\n"
        line = redact(line, self.secrets) if self.secrets else line  # what str() made
        os.write(self._fd, line.encode())
        if durable:  # stages, checkpoints and results must survive a crash of the machine
            os.fsync(self._fd)
        self.last_write = time.time()
        return event

    def close(self) -> None:
        os.close(self._fd)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy and torch scalars
        return value.item()
    return str(value)


def _ends_mid_line(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


@dataclass
class EventBatch:
    events: list[tuple[int, dict[str, Any]]]  # (byte offset of the line, event)
    offset: int  # where the next read starts: after the last complete line
    torn: list[int]  # byte offsets of lines that were not valid JSON (skipped)


def read_events(path: Path, offset: int = 0, final: bool = False) -> EventBatch:
    """Complete events from `offset` on. A last line without its newline is left for the
    next read, unless `final` (the writer is gone), when it is reported as torn."""
    events: list[tuple[int, dict[str, Any]]] = []
    torn: list[int] = []
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return EventBatch([], offset, [])
    position = offset
    for raw in data.splitlines(keepends=True):
        complete = raw.endswith(b"\n")
        if not complete and not final:
            break
        try:
            event = json.loads(raw)
            if not isinstance(event, dict) or "type" not in event:
                raise ValueError("not an event")
            events.append((position, event))
        except ValueError:
            if raw.strip():
                torn.append(position)
        position += len(raw)
    return EventBatch(events, position, torn)


def write_result(directory: Path, status: str, cause: str | None, **final: Any) -> None:
    """Append the run's result event (durable: it is how the run ended)."""
    events = EventWriter(directory)
    events.write("result", durable=True, status=status, cause=cause, final=final)
    events.close()


def record_end(directory: Path, cause: str, **final: Any) -> None:
    """The result of a run whose trainer ended without writing one: cancelled when someone
    asked it to stop, failed otherwise."""
    if (directory / CANCEL_REQUEST).exists():
        write_result(directory, "cancelled", f"cancelled by request; {cause}", **final)
    else:
        write_result(directory, "failed", cause, **final)


def has_result(directory: Path) -> bool:
    """Whether the run has ended (a result event is written). Incremental: each call reads
    only what was appended since the last one (pollers call this often on long logs)."""
    path = directory / EVENTS
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    inode, offset, found = _RESULT_SCAN.get(path, (stat.st_ino, 0, False))
    if inode != stat.st_ino or stat.st_size < offset:  # replaced (a mirror) or truncated
        offset, found = 0, False
    if not found and stat.st_size > offset:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        for line in complete.splitlines():
            if b'"type":"result"' in line:
                with contextlib.suppress(ValueError):
                    found = found or json.loads(line).get("type") == "result"
        offset += len(complete)
    _RESULT_SCAN[path] = (stat.st_ino, offset, found)
    if len(_RESULT_SCAN) > 4096:
        _RESULT_SCAN.pop(next(iter(_RESULT_SCAN)))
    return found


_RESULT_SCAN: dict[Path, tuple[int, int, bool]] = {}  # events file -> (inode, offset, found)


def result_time(directory: Path, tail_bytes: int = 65536) -> float | None:
    """When the run's result event was written (unix s), read from the end of its events
    (the result is among the last lines); None without one."""
    path = directory / EVENTS
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if b'"type":"result"' in line:
            with contextlib.suppress(ValueError, AttributeError):
                return float(json.loads(line).get("t"))
    return None


def iter_events(directory: Path) -> Iterator[dict[str, Any]]:
    """Every readable event of a run, in order (torn lines skipped)."""
    for _, event in read_events(directory / EVENTS, final=True).events:
        yield event


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a live process from
    a recycled pid; None where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_alive(pid: int | None, start: int | None = None) -> bool:
    """Alive, not a zombie, and (when `start` is known) the same process that was recorded."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: the signal check is all we have
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start
