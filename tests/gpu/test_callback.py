"""Data-parallel ranks stop together: a real two-process gloo group on the CPU, and the device
the step agreement's tensor lives on for each process-group backend (NCCL cannot run here)."""

import json
import os
import subprocess
import sys

import pytest

from posttrain.gpu.callback import reduce_device

# One rank of a gloo group (a FileStore: no port to find): its ReportingCallback's step end,
# with this rank's own run directory, which holds cancel.request on the ranks told to stop.
RANK = """
import datetime, json, os, sys
from pathlib import Path

import torch.distributed as dist
from transformers import TrainerControl, TrainerState

from posttrain.gpu.callback import ReportingCallback, agreed
from posttrain.gpu.ranks import SilentReporter, leave

rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group(
    "gloo",
    store=dist.FileStore(store, world),
    rank=rank,
    world_size=world,
    timeout=datetime.timedelta(seconds=60),
)
run_dir = Path(sys.argv[4]) / f"rank{rank}"
callback = ReportingCallback(SilentReporter(run_dir), "train", proof=False)
control = callback.on_step_end(None, TrainerState(global_step=3), TrainerControl())
print(json.dumps({
    "rank": rank,
    "backend": str(dist.get_backend()),
    "stop": control.should_training_stop,
    "save": control.should_save,
    "nobody_asked": agreed(False),
}))
leave()
"""


def ranks_told(tmp_path, stopping: set[int], world: int = 2) -> list[dict]:
    for rank in range(world):
        (tmp_path / f"rank{rank}").mkdir()
        if rank in stopping:
            (tmp_path / f"rank{rank}" / "cancel.request").write_text("")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(rank), str(world), str(tmp_path / "store"), tmp_path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in range(world)
    ]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return outs


@pytest.mark.slow
def test_when_one_rank_of_a_gloo_group_is_asked_to_stop_every_rank_stops_after_that_step(
    tmp_path,
):
    outs = ranks_told(tmp_path, stopping={1})
    assert [o["backend"] for o in outs] == ["gloo", "gloo"]
    assert [(o["rank"], o["stop"], o["save"]) for o in outs] == [(0, True, True), (1, True, True)]
    assert [o["nobody_asked"] for o in outs] == [False, False]  # and none stops unasked


@pytest.mark.parametrize("backend", ["gloo", "cpu:gloo,cuda:nccl", "mpi"])
def test_the_step_agreement_reduces_a_cpu_tensor_where_the_group_reduces_on_the_cpu(backend):
    assert reduce_device(backend) == "cpu"


@pytest.mark.parametrize("backend", ["nccl", "cuda:nccl"])
def test_over_nccl_the_step_agreement_reduces_on_this_ranks_own_gpu(backend, monkeypatch):
    """NCCL refuses CPU tensors ("No backend type associated with device type cpu"): the
    tensor goes to the GPU accelerate made current for this rank (the GPU bench runs it)."""
    import torch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)  # no GPU here: rank 3's
    assert reduce_device(backend) == "cuda:3"
