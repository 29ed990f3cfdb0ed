"""Work that can wait runs below the server: trainers, evaluations and merges lower their own
CPU priority, so that beside them a status call still answers and the machine's owner keeps
control (a server that answers in seconds under load is no use to an agent watching a run).

Two knobs, both only ever raised (an unprivileged process may not lower them again):
- the process's nice value (`os.nice`), which its children inherit (a forked trainer too);
- where the kernel groups CPU time by session (Linux's autogroup, on by default on desktop
  distributions), the session's own nice value: a detached run leads its own session, and
  the scheduler first shares the CPU between sessions, so a trainer niced inside its session
  would still get as much CPU as the server's whole session. Only a session leader writes it:
  the session of a process that is not one is its launcher's (the server's own).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

NICE_ENV = "POSTTRAIN_TRAINER_NICE"
DEFAULT_NICE = 10  # a nice-10 task weighs ~1/9 of a nice-0 one: ~10% of a core beside a hog
AUTOGROUP = Path("/proc/self/autogroup")


def background_nice() -> int:
    """The nice value of background work: $POSTTRAIN_TRAINER_NICE (0 to 19), else 10."""
    try:
        return max(0, min(19, int(os.environ.get(NICE_ENV) or DEFAULT_NICE)))
    except ValueError:
        return DEFAULT_NICE


def lower_priority(nice: int | None = None) -> int:
    """Raise this process's nice value to `nice` (default background_nice()), and its
    session's where it leads one; never lowers either. Returns the nice value it now has."""
    target = background_nice() if nice is None else nice
    current = os.nice(0)
    if target > current:
        with contextlib.suppress(OSError):
            current = os.nice(target - current)
    if os.getsid(0) == os.getpid():
        _raise_autogroup(target)
    return current


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice value of the process's session where the kernel groups CPU time by session,
    else None: no such file (another OS, a kernel without it), or a file that exists but
    says nothing readable (some containers and sandboxes serve it empty)."""
    try:
        text = Path(f"/proc/{pid}/autogroup").read_text()  # "/autogroup-123 nice 0"
        return int(text.rsplit("nice", 1)[1])
    except (OSError, ValueError, IndexError):
        return None


def _raise_autogroup(target: int) -> None:
    """The session's nice value, where the kernel groups by session and lets us write it."""
    current = autogroup_nice()
    if current is not None and current < target:
        with contextlib.suppress(OSError):
            AUTOGROUP.write_text(str(target))
