"""Data-parallel training (torchrun, accelerate): every rank runs the same trainer, and rank 0
alone writes the run directory. The other ranks report nothing, and all ranks agree on when
to stop (posttrain.gpu.callback.agreed), or the others would wait forever at the next
all-reduce."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from posttrain.gpu.reporter import Reporter
from posttrain.spec.batch import per_device


class SilentReporter(Reporter):
    """What a trainer process other than rank 0 reports: nothing. Under data parallel every
    rank runs the same code, and rank 0 alone writes the run directory; the others still
    read cancel and timeout requests, so every rank stops at the same step."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.events = _NoEvents()  # type: ignore[assignment]
        self.step = 0
        self.cancel_requested = False
        self._stop = threading.Event()

    def trace(self, step: int, rows: list[dict[str, Any]], phase: str = "train") -> None:
        pass

    def failure(self, exc: BaseException) -> str:
        """Rank 0 alone writes the run's cause; another rank's failure goes to its stderr, or
        nobody would ever see why it stopped (torchrun only says it exited)."""
        import sys
        import traceback

        from posttrain.core.secrets import redact

        print(
            f"rank {rank()} failed:\n" + redact("".join(traceback.format_exception(exc))),
            file=sys.stderr,
        )
        return super().failure(exc)

    def close(self) -> None:
        pass


class _NoEvents:
    last_write = 0.0
    secrets: tuple[str, ...] = ()  # nothing is written, so nothing needs masking

    def write(self, type_: str, durable: bool = False, **fields: Any) -> dict[str, Any]:
        return {"type": type_, **fields}

    def close(self) -> None:
        pass


def rank() -> int:
    """This process's rank under torchrun/accelerate (0 when training alone)."""
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    """How many processes train together under torchrun/accelerate (1 when training alone)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def device_batch(batch: int, field: str = "algorithm.batch_size", groups: int = 1) -> int:
    """This process's per_device_train_batch_size: its share of the spec's batch, which is the
    batch of every process together (posttrain.spec.batch)."""
    return per_device(batch, world_size(), field, groups)


def leave() -> None:
    """End this rank's part in the process group, every rank together. A gloo group left to
    the interpreter's exit aborts the process ("terminate called without an active
    exception") when one rank finishes while another still holds a connection."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()
