"""The spec's batch is the batch of all GPUs together: `algorithm.batch_size` completions (GRPO),
rows (SFT), pairs (DPO) or prompts (distillation) a step, whatever the GPU count; the same for
`algorithm.warmstart.batch_size`. Under data parallel each GPU trains its share, batch / N, so
a run's steps, its learning dynamics and its judge's calls do not change with the GPU count.

GRPO's rule stays TRL's: its generation batch (the per-GPU batch x the GPU count) must be
divisible by num_generations, which a whole batch divisible by num_generations is. A prompt's
completions may then lie on two GPUs; TRL gathers every GPU's rewards before it computes the
advantages, so the groups are whole where it matters.
"""

from __future__ import annotations

import math

from posttrain.core.errors import ConfigError


def per_device(
    batch: int, devices: int, field: str = "algorithm.batch_size", groups: int = 1
) -> int:
    """Each device's share of a batch of all `devices` together; refused, naming `field` and
    the nearest batches that divide (and stay multiples of `groups`, GRPO's num_generations),
    when it does not divide."""
    if devices < 1:
        raise ValueError(f"{devices} devices")
    if batch % devices == 0:
        return batch // devices
    step = math.lcm(devices, groups)
    below, above = batch // step * step, (batch // step + 1) * step
    nearest = f"{below} or {above}" if below else f"{above}"
    of_groups = f" and stay a multiple of num_generations ({groups})" if groups > 1 else ""
    raise ConfigError(
        f"{field} {batch} is the batch of all {devices} GPUs together and must divide among "
        f"them{of_groups}: use {nearest}, or a GPU count that divides {batch}"
    )


def split_text(batch: int, devices: int) -> str:
    """How a plan says the split: 'batch 64 in all, 16 a GPU'."""
    return f"batch {batch} in all, {batch // devices} a GPU"
