"""How a long command says how it is going, decided here once for every command that waits
(the demo, eval, job get --follow, smoke).

- On a terminal: rich bars, as a person expects.
- Without one (an agent's shell pipes stdout; rich draws nothing there): plain lines, one
  when something changes (at most one a task every CHANGE_S, a milestone at once) and the
  latest state again after HEARTBEAT_S of silence. The heartbeat comes from a thread, so a
  call that blocks (an in-process evaluation, a slow store read) cannot silence the command:
  an agent that sees nothing for minutes assumes a hang and kills the job.
- With --json --events: the same lines as JSON objects ({"event": "progress", ...}), one a
  line, and the command's result object last, on one line.
- With --json alone: the result alone on stdout, one JSON document; the plain lines go to
  stderr, so a piped agent still hears that the command lives and `json.loads` reads stdout.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import typer
from rich.text import Text

HEARTBEAT_S = 10.0  # the promise is a line every 15 s; 10 leaves room for a slow write
CHANGE_S = 5.0  # a step every half second would be a line every half second
TICK_S = 1.0  # how often the heartbeat thread looks

Mode = Literal["bar", "lines", "events", "quiet"]

EventsFlag = Annotated[
    bool,
    typer.Option(
        "--events",
        help="Stream progress as JSON lines (implies --json); the result object is the last line.",
    ),
]


def mode_for(as_json: bool, events: bool = False) -> Mode:
    """The one decision: events, quiet JSON, a terminal's bars, or plain lines in a pipe."""
    if events:
        return "events"
    if as_json:
        return "quiet"
    return "bar" if sys.stdout.isatty() else "lines"


@dataclass
class _Task:
    label: str
    done: int | None = None
    total: int | None = None
    info: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    said_at: float = 0.0  # when its last line was written (monotonic)
    unsaid: bool = True  # changed since its last line


class Reporter:
    """Progress of one command: `update` a task as often as you like; what is written, and
    how often, follows the mode."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.started = time.monotonic()
        self.tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()
        self._last_line = self.started
        self._stop = threading.Event()
        self._bar: Any = None
        self._bar_ids: dict[str, Any] = {}

    def update(
        self,
        key: str,
        label: str,
        done: int | None = None,
        total: int | None = None,
        info: str = "",
        milestone: bool = False,
        **fields: Any,
    ) -> None:
        """The state of one task (a run, a phase, a job). A milestone (a new stage, a tenth of
        the steps) is written at once; any other change at most every CHANGE_S."""
        with self._lock:
            task = self.tasks.get(key)
            if task is None:
                task = self.tasks[key] = _Task(label)
                milestone = True
            changed = (label, done, total, info) != (task.label, task.done, task.total, task.info)
            task.label, task.done, task.total, task.info = label, done, total, info
            task.fields = fields
            task.unsaid = task.unsaid or changed
            if self.mode == "bar":
                self._draw(key, task)
                return
            now = time.monotonic()
            if task.unsaid and (milestone or now - task.said_at >= CHANGE_S):
                self._say(task, now)

    def note(self, message: str, **fields: Any) -> None:
        """A line that is said once (what was started, what comes next): rich text on a
        terminal and in a pipe, an event with --events, nothing with --json alone."""
        from posttrain.cli.common import console

        with self._lock:
            if self.mode in ("bar", "lines"):
                console.print(message, highlight=False)
            elif self.mode == "quiet":
                print(Text.from_markup(message).plain, file=sys.stderr, flush=True)
            elif self.mode == "events":
                plain = Text.from_markup(message).plain
                print(json.dumps({"event": "note", "message": plain, **fields}), flush=True)
            self._last_line = time.monotonic()

    def heard(self) -> None:
        """The command wrote something itself (a log line): the silence starts again."""
        with self._lock:
            self._last_line = time.monotonic()

    def forget(self, key: str) -> None:
        """A task whose end the command says itself: dropped, its last state unsaid."""
        with self._lock:
            self.tasks.pop(key, None)

    def close(self, key: str) -> None:
        """A task that ended: its last state is written (a pipe sees 250/250), then the
        heartbeat leaves it out."""
        with self._lock:
            task = self.tasks.pop(key, None)
            if task is None:
                return
            if self.mode == "bar":
                self._bar.update(self._bar_ids[key], completed=task.total or task.done or 0)
            elif task.unsaid:
                self._say(task, time.monotonic())

    def _say(self, task: _Task, now: float) -> None:
        elapsed_s = now - self.started
        if self.mode == "events":
            event = {
                "event": "progress",
                "elapsed_s": round(elapsed_s, 1),
                "task": task.label,
                "done": task.done,
                "total": task.total,
                "info": task.info,
                **task.fields,
            }
            line = json.dumps(event, default=str)
        elif self.mode in ("lines", "quiet"):
            count = "" if task.done is None else f" {task.done}/{task.total or '?'}"
            info = f" {task.info}" if task.info else ""
            minutes, seconds = divmod(int(elapsed_s), 60)
            line = f"{task.label}{count}{info} (elapsed {minutes}:{seconds:02d})"
        else:
            return
        try:
            print(line, flush=True, file=sys.stderr if self.mode == "quiet" else sys.stdout)
        except (BrokenPipeError, ValueError):  # the reader went away: nothing to tell
            self._stop.set()
        task.said_at, task.unsaid = now, False
        self._last_line = now

    def _heartbeat(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                now = time.monotonic()
                if now - self._last_line < HEARTBEAT_S:
                    continue
                for task in self.tasks.values():
                    self._say(task, now)
                if not self.tasks:
                    self._say(_Task("waiting"), now)

    def _draw(self, key: str, task: _Task) -> None:
        if key not in self._bar_ids:
            self._bar_ids[key] = self._bar.add_task(task.label, total=task.total, info="")
        completed = task.done or 0
        self._bar.update(
            self._bar_ids[key],
            description=task.label,
            completed=completed,
            total=task.total,
            info=task.info,
        )

    @contextmanager
    def running(self) -> Iterator[Reporter]:
        if self.mode == "bar":
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            from posttrain.cli.common import console

            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=console,
            ) as bar:
                self._bar = bar
                yield self
            return
        beat = threading.Thread(target=self._heartbeat, name="progress-heartbeat", daemon=True)
        if self.mode in ("lines", "events", "quiet"):
            beat.start()
        try:
            yield self
        finally:
            self._stop.set()
            if beat.is_alive():
                beat.join(timeout=2 * TICK_S)
            for key in list(self.tasks):
                self.close(key)


@contextmanager
def progress(as_json: bool, events: bool = False) -> Iterator[Reporter]:
    """A Reporter for the length of a `with` block (its heartbeat stops with the block)."""
    with Reporter(mode_for(as_json, events)).running() as reporter:
        yield reporter
