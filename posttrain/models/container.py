"""What a training container on Modal holds and costs a second, and the most seconds a run
can be billed: the GPUs, the CPU cores and the memory, each at Modal's price.

Modal bills every second a container runs: its GPUs, its physical CPU cores and its memory
(the larger of what it requested and what it used). posttrain asks for a fixed number of cores
and a fixed amount of memory, request and limit alike, so that what it uses can never be billed
above what the plan priced: the limit is the bill. Memory is sized by the model's weights
(loading a checkpoint holds it in host memory before it moves to the GPU, in every GPU's
process). These sizes are reasoned, not measured on Modal.

The most a run can be billed (posttrain.gpu.attempts keeps it so): its whole
`compute.timeout_s`, counted from the first start of posttrain's code in a container, plus two
container starts (CONTAINER_BOOT_S each): the first one's, before that window opens, and one
restart after the window closed, which ends at once. Every other restart (a preemption, a
crash, Modal's retry after an error or its timeout) runs inside the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from posttrain.models.catalog import gpu_prices, resource_prices, shape_of

CORES_PER_GPU = 4.0  # physical cores: the trainer's data loading, rewards, tokenizing
MIN_MEMORY_GIB = 32
# A container's start before posttrain's code runs: the image's start, Python and imports.
# Modal's cold starts are seconds to tens of seconds; 90 s is the allowance priced.
CONTAINER_BOOT_S = 90
# A container's end after the run wrote its result: the last Volume commit and the exit, still
# billed (the fake platform measured ~0.5 s; a commit retried after an error takes longer).
CONTAINER_END_S = 30


@dataclass(frozen=True)
class Container:
    gpu: str
    gpu_count: int
    cores: float
    memory_gib: int

    @property
    def memory_mib(self) -> int:
        return self.memory_gib * 1024

    @property
    def usd_per_s(self) -> float:
        """Every charge of one second of this container."""
        cpu, memory = resource_prices()
        return gpu_prices()[self.gpu] * self.gpu_count + self.cores * cpu + self.memory_gib * memory

    @property
    def gpu_usd_per_s(self) -> float:
        return gpu_prices()[self.gpu] * self.gpu_count

    def options(self) -> dict[str, object]:
        """`Function.with_options` keywords: request and limit alike, so the bill is bounded."""
        return {
            "cpu": (self.cores, self.cores),
            "memory": (self.memory_mib, self.memory_mib),
        }

    def described(self) -> str:
        cpu, memory = resource_prices()
        return (
            f"{self.gpu_count}x {self.gpu} ${self.gpu_usd_per_s * 3600:.2f}/h + "
            f"{self.cores:g} CPU cores ${self.cores * cpu * 3600:.2f}/h + "
            f"{self.memory_gib} GiB memory ${self.memory_gib * memory * 3600:.2f}/h"
        )


def container_for(gpu: str, gpu_count: int, model_params: int | None) -> Container:
    """The container a run of a model of `model_params` parameters asks for (None: unknown,
    sized as an 8B model)."""
    weights_gib = 2 * (model_params or 8_000_000_000) / 2**30  # bf16 on disk and in memory
    # rank 0 loads and saves (a full fine-tune's fp32 copy: twice the bf16 weights) with room
    # to spare; each other GPU's process holds its own load of the weights
    memory_gib = 4 * weights_gib + 2 * weights_gib * (gpu_count - 1) + 16
    memory = max(MIN_MEMORY_GIB, math.ceil(memory_gib))
    return Container(gpu, gpu_count, CORES_PER_GPU * gpu_count, memory)


def container_for_model(gpu: str, gpu_count: int, model: str) -> Container:
    """The container for a model a spec names (a preset, a folder, a .gguf: its shape)."""
    shape = shape_of(model)
    return container_for(gpu, gpu_count, shape.n_params if shape else None)


def worst_case_s(timeout_s: float) -> float:
    """The most container seconds a run with this timeout can be billed (the module's doc)."""
    return timeout_s + 2 * CONTAINER_BOOT_S
