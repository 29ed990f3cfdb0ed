"""A run's starts on Modal and the one window they share, so a run is never billed past the
time its human approved, however often Modal restarts it.

Modal starts an input again after a preemption, after a container crash (for a deployed app,
indefinitely, with a back-off), and `retries` times after an error or a timeout, each with a
fresh timeout. Every start is written to the run directory (starts.json) and committed before
anything else; the window opens at the first: `compute.timeout_s` later the run is over,
whatever restarted it. So:
- a start after the window closed, or past MAX_STARTS, trains nothing: it writes the run's
  result (unless the run already has one) and returns it;
- the trainer is asked to stop (timeout.request, as the local supervisor asks) a margin before
  the window closes, long enough for its current step and the save of final/;
- at the window's end a process still running writes a result and ends (`expire`).
The most a run can then be billed is posttrain.models.container.worst_case_s.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posttrain.runs.layout import (
    EVENTS,
    TIMEOUT_REQUEST,
    has_result,
    iter_events,
    read_events,
    write_json_atomic,
    write_result,
)

STARTS = "starts.json"
MAX_STARTS = 4  # the first and three restarts; a crash loop stops there
STOP_MARGIN_MIN_S = 30.0
SAVE_ALLOWANCE_S = 60.0  # the final save and a Volume commit, beyond two of the last steps


@dataclass(frozen=True)
class Start:
    number: int  # 1 for the first
    first_at: float
    deadline: float  # first_at + timeout_s
    refused: str | None  # why this start trains nothing, or None


def begin(run_dir: Path, timeout_s: float, now: float | None = None) -> Start:
    """Record this start; say whether it may train."""
    now = time.time() if now is None else now
    path = run_dir / STARTS
    try:
        starts = [float(t) for t in json.loads(path.read_text())["starts"]]
    except (OSError, ValueError, KeyError, TypeError):
        starts = []
    starts.append(now)
    write_json_atomic(path, {"starts": starts, "timeout_s": timeout_s})
    first = starts[0]
    deadline = first + timeout_s
    refused = None
    if now >= deadline:
        refused = (
            f"restarted by Modal {now - first:.0f} s after its first start, past its "
            f"compute.timeout_s ({timeout_s:.0f} s): the run is over"
        )
    elif len(starts) > MAX_STARTS:
        refused = (
            f"started {len(starts)} times (its container kept dying: look at the logs of the "
            f"earlier starts); posttrain stops after {MAX_STARTS}"
        )
    return Start(len(starts), first, deadline, refused)


def finish_refused(run_dir: Path, start: Start) -> str:
    """A start that trains nothing: the run's result, written now unless it has one."""
    if not has_result(run_dir):
        write_result(run_dir, "failed", start.refused)
    return last_status(run_dir)


def last_status(run_dir: Path) -> str:
    results = [e for e in iter_events(run_dir) if e.get("type") == "result"]
    return str(results[-1].get("status", "failed")) if results else "failed"


def stop_margin_s(step_s: float, timeout_s: float) -> float:
    """How long before the window closes the trainer is asked to stop, its last step having
    taken step_s: two such steps and the save, at least STOP_MARGIN_MIN_S, at most half the
    window."""
    margin = max(STOP_MARGIN_MIN_S, 2 * step_s + SAVE_ALLOWANCE_S)
    return min(margin, timeout_s / 2)


class LastStep:
    """The last step's seconds in a run's events, read as they are appended (the deadline
    asks every second; a long run's log is never read whole again)."""

    def __init__(self, run_dir: Path) -> None:
        self.path, self.offset, self.step_s = run_dir / EVENTS, 0, 0.0

    def seconds(self) -> float:
        if self.path.exists():
            batch = read_events(self.path, self.offset)
            self.offset = batch.offset
            for _, event in batch.events:
                if event.get("type") == "metrics" and isinstance(
                    event.get("step_time_s"), int | float
                ):
                    self.step_s = float(event["step_time_s"])
        return self.step_s


class Deadline:
    """While the run trains: a stop request before the window closes, and `expire()` at its
    end if the trainer has not returned by then."""

    def __init__(
        self, run_dir: Path, start: Start, timeout_s: float, expire: Callable[[], None]
    ) -> None:
        self.run_dir, self.start, self.timeout_s, self.expire = run_dir, start, timeout_s, expire
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="deadline", daemon=True)
        self._last_step = LastStep(run_dir)
        self.stop_requested_at: float | None = None

    def _watch(self) -> None:
        while not self._done.is_set():
            now = time.time()
            if now >= self.start.deadline:
                if not has_result(self.run_dir):
                    write_result(
                        self.run_dir,
                        "failed",
                        f"timeout after {self.timeout_s:.0f} s (compute.timeout_s): the trainer "
                        f"did not stop when asked; the run was ended",
                    )
                self.expire()
                return
            margin = stop_margin_s(self._last_step.seconds(), self.timeout_s)
            if self.stop_requested_at is None and now >= self.start.deadline - margin:
                write_json_atomic(
                    self.run_dir / TIMEOUT_REQUEST,
                    {"timeout_s": self.timeout_s, "at": now, "by": "the run's deadline on Modal"},
                )
                self.stop_requested_at = now
            self._done.wait(min(1.0, max(0.05, self.start.deadline - now)))

    def __enter__(self) -> Deadline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(5)
