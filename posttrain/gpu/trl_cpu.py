"""What posttrain changes in TRL for training on the CPU: one thing, said here.

TRL 1.16 computes GRPO's log-probabilities and SFT's loss through a fused LM head, in
tiles. On CUDA and XPU it scores only the positions that have a label (a completion's
tokens, an assistant turn's); elsewhere it scores every position, prompt and padding alike,
to keep tile shapes fixed for compilers such as Neuron's (trl/trainer/utils.py:
`compact = _use_triton(device)`). On the CPU nothing compiles those tiles, so scoring the
prompt is pure time: with a 151,936-row
vocabulary and a prompt that carries tool schemas, the dry run of an environment spec spent
most of its steps projecting prompt tokens through the head. Scoring only the labelled
positions gives the same numbers (the same rows through the same kernel): measured side by
side (2026-12-03), the environment dry run of tests/test_environment_training.py took 17 s
instead of 44 s with equal metrics at every step; `python bench/cpu_logprobs.py` prints the
kernel's own figures.
"""

from __future__ import annotations

import functools


@functools.cache
def score_only_labelled_positions() -> bool:
    """Make TRL's fused LM head score only labelled positions on the CPU as well. Returns
    whether it could: False when this TRL no longer has the switch (nothing is changed then,
    and the run is only slower)."""
    import trl.trainer.utils as trl_utils
    from trl.kernels.chunked_logprob import _use_triton

    if getattr(trl_utils, "_use_triton", None) is not _use_triton:
        return False

    def compact(device) -> bool:
        return device.type == "cpu" or _use_triton(device)

    trl_utils._use_triton = compact
    return True
