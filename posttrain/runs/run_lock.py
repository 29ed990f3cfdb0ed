"""The run's lock: who may write a verdict about a run that has no result yet.

A launcher holds it from the moment it creates the run folder (reserve) until the backend's
handle is recorded in run.json (record), so a reader that reconciles runs (`run list`, the
dashboard, another server) never judges a run that another process is still starting. A
reconcile takes it without waiting before it writes a final status, so two readers never
judge one run at once and neither judges a run mid-launch. The kernel drops the lock
however its holder ends (SIGKILL included): a launcher that died leaves it free.

The lock is an flock on `run.lock` in the run folder: one per open file, so a second open
in the launcher's own process (its own reconcile) is refused as well.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK = "run.lock"


class LaunchLock:
    """Held by the launcher while the run is being started; `release()` when recorded."""

    def __init__(self, run_dir: Path) -> None:
        self._fd: int | None = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)  # a fresh folder: nobody else holds it

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


@contextlib.contextmanager
def judging(run_dir: Path) -> Iterator[bool]:
    """Yields True while this process alone may write the run's verdict; False when its
    launcher (or another reader) holds the run, or the lock cannot be made (a read-only
    disk, where no verdict could be written anyway)."""
    with held_alone(run_dir / LOCK) as mine:
        yield mine


@contextlib.contextmanager
def held_alone(path: Path) -> Iterator[bool]:
    """An flock on `path` taken without waiting: True while this process holds it, False
    when another does or the lock file cannot be made."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
