"""Training on several GPUs of one container (`H100:4`): `accelerate launch` starts one trainer
process a GPU around the same `python -m posttrain.gpu.train RUN_DIR` entrypoint (rank 0 alone
writes the run directory: posttrain.gpu.ranks), and the run ends as that directory says.

Two things the launcher cannot take for granted:
- The children start in the run directory (the spec names its uploaded inputs relative to it),
  and `-m` puts only that directory on their path. The Modal image carries posttrain as a source
  folder, not an installed package, so their PYTHONPATH names the folder that holds it.
- An exit code is not an outcome: a cancelled trainer exits 0 as a finished one does. The
  trainer's `result` event says how the run ended; processes that ended without writing one
  failed (or were cancelled, when someone asked), and that is written, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from posttrain.runs.layout import EVENTS, read_events, record_end

# The folder that holds the posttrain package, found where this module was imported from
# (before anyone changes directory into a run).
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def launch_command(run_dir: Path, processes: int) -> list[str]:
    """`accelerate launch --multi_gpu`: one process a GPU, NCCL between them."""
    return [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", str(processes)),
        *("-m", "posttrain.gpu.train", str(run_dir)),
    ]


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the trainer processes start with: `base` (this process's), with the
    folder that holds posttrain first on PYTHONPATH, whatever their working directory."""
    env = dict(os.environ if base is None else base)
    others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != PACKAGE_ROOT]
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *others])
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def train_data_parallel(run_dir: Path, processes: int, command: list[str] | None = None) -> str:
    """Train run_dir in `processes` data-parallel processes started from the run directory;
    returns the run's status as the directory records it (`command`: another launcher of the
    same entrypoint, e.g. torchrun on CPUs)."""
    events = run_dir / EVENTS
    start = events.stat().st_size if events.exists() else 0  # a restart's earlier events
    code = subprocess.run(
        command or launch_command(run_dir, processes),
        cwd=run_dir,
        env=child_env(),
        check=False,
    ).returncode
    return recorded_status(run_dir, start, code, processes)


def recorded_status(run_dir: Path, start: int, code: int, processes: int) -> str:
    """The status of the result the trainers wrote after `start` (a byte offset into the
    events); without one, the run's end is written (posttrain.runs.layout.record_end) and read
    back."""
    if (status := _result_after(run_dir, start)) is None:
        record_end(
            run_dir,
            f"the {processes} data-parallel trainer processes ended (accelerate launch exit "
            f"code {code}) without writing a result; their output is in the container's log",
        )
        status = _result_after(run_dir, start)
    assert status is not None
    return status


def _result_after(run_dir: Path, start: int) -> str | None:
    batch = read_events(run_dir / EVENTS, start, final=True)
    results = [e for _, e in batch.events if e["type"] == "result"]
    return str(results[-1]["status"]) if results else None
