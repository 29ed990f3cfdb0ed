"""Background work runs below the server: a process lowers its own CPU priority (and its
session's, where the kernel shares CPU between sessions and it leads one), never the
server's, and a run's trainer inherits it whether forked or started."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.core.priority import autogroup_nice

LOWER = (
    "import os; from posttrain.core.priority import lower_priority; lower_priority(); "
    "print(os.nice(0)); print(open('/proc/self/autogroup').read() if os.path.exists("
    "'/proc/self/autogroup') else 'none')"
)


def nice_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def lowered(**popen) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-c", LOWER], capture_output=True, text=True, check=True, **popen
    ).stdout.splitlines()
    return int(out[0]), out[1]


def test_a_session_leader_lowers_itself_and_its_session_and_the_launcher_keeps_its_own():
    mine = os.nice(0), autogroup_nice(os.getpid())
    nice, group = lowered(start_new_session=True)
    assert nice == max(10, mine[0])
    if mine[1] is not None:  # the kernel shares CPU between sessions: the session is lowered
        assert group.strip().endswith("nice 10"), group
    assert (os.nice(0), autogroup_nice(os.getpid())) == mine


def test_a_process_in_its_launchers_session_lowers_only_itself(monkeypatch):
    mine = autogroup_nice(os.getpid())
    monkeypatch.setenv("POSTTRAIN_TRAINER_NICE", "5")
    nice, _ = lowered()
    assert nice == max(5, os.nice(0))
    assert autogroup_nice(os.getpid()) == mine  # the launcher's session (the server's) as it was


@pytest.mark.parametrize("value, nice", [("0", 0), ("19", 19), ("99", 19), ("x", 10)])
def test_the_level_is_read_from_the_environment_and_bounded(monkeypatch, value, nice):
    from posttrain.core.priority import background_nice

    monkeypatch.setenv("POSTTRAIN_TRAINER_NICE", value)
    assert background_nice() == nice
