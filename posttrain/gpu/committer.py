"""Commits a Modal Volume while a run writes it: every few seconds, never in the middle of a
save, retrying a commit that failed, and saying so.

A commit makes what the container wrote durable and visible to the launcher. One taken while
the trainer writes a checkpoint would persist half of it, so a commit waits while the run
directory's `saving` marker exists (posttrain.gpu.callback sets it from the step a save is due
until the save is done; train.py around final/), up to MAX_SAVE_WAIT_S. A commit that raises
(a network error, the Volume busy) is logged to stderr (Modal's log of the container) and
retried with a back-off; the loop never dies of it. The last commit, at the end, is retried
the same way, so the run's result reaches the launcher.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from posttrain.runs.layout import SAVING

COMMIT_EVERY_S = 30.0  # the trainer's events reach the Volume (and the launcher) this often
MAX_SAVE_WAIT_S = 600.0  # a save longer than this is committed as it stands, and said
RETRY_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0)
FINAL_ATTEMPTS = 6


class Committer:
    """`commit` is the Volume's commit (None: nothing to commit, outside a container)."""

    def __init__(
        self,
        commit: Callable[[], None] | None,
        run_dir: Path | None = None,
        every_s: float = COMMIT_EVERY_S,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._commit, self.run_dir, self.every_s = commit, run_dir, every_s
        self.log = log or (lambda message: print(f"posttrain: {message}", file=sys.stderr))
        self.commits = self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="volume-commit", daemon=True)

    @property
    def active(self) -> bool:
        return self._commit is not None

    def _saving(self) -> bool:
        return self.run_dir is not None and (self.run_dir / SAVING).exists()

    def _wait_for_save(self, stop: threading.Event | None = None) -> None:
        waited_from, stop = time.time(), stop or threading.Event()
        while self._saving():
            if time.time() - waited_from > MAX_SAVE_WAIT_S:
                self.log(f"a save has taken over {MAX_SAVE_WAIT_S:.0f} s: committing as it stands")
                return
            if stop.wait(0.2):
                return

    def commit(self) -> bool:
        """One commit, after any save in progress; False (logged) when it raised."""
        if self._commit is None:
            return True
        self._wait_for_save()
        try:
            self._commit()
        except Exception as exc:  # the SDK's errors are many: each is logged and retried
            self.failures += 1
            self.log(f"Volume commit failed ({type(exc).__name__}: {exc}); retrying")
            return False
        self.commits += 1
        return True

    def _loop(self) -> None:
        failed_in_a_row = 0
        while True:
            delay = (
                self.every_s
                if not failed_in_a_row
                else RETRY_DELAYS_S[min(failed_in_a_row, len(RETRY_DELAYS_S)) - 1]
            )
            if self._stop.wait(delay):
                return
            self._wait_for_save(self._stop)
            if self._stop.is_set():
                return
            failed_in_a_row = 0 if self.commit() else failed_in_a_row + 1

    def final(self) -> bool:
        """The last commit, retried: the run's result must reach the launcher."""
        for attempt in range(FINAL_ATTEMPTS):
            if self.commit():
                return True
            time.sleep(RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S) - 1)])
        lost = "the launcher may not see how the run ended"
        self.log(f"the last Volume commit failed {FINAL_ATTEMPTS} times: {lost}")
        return False

    def __enter__(self) -> Committer:
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.active:
            self._thread.join()
        self.final()


@contextlib.contextmanager
def saving(run_dir: Path) -> Iterator[None]:
    """Mark the run directory as being written (a checkpoint, final/) for the duration."""
    marker = run_dir / SAVING
    marker.write_text(f"{time.time()}\n")
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
