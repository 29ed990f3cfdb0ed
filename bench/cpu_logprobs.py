"""TRL's fused LM head on the CPU: every position scored (TRL 1.16 as shipped) against only the
completion's (posttrain.gpu.trl_cpu), side by side, on the dry-run stand-in's shape.

    python bench/cpu_logprobs.py [--prompt 400] [--completion 32] [--batch 4] [--repeats 3]

The head is the stand-in's (hidden 64, Qwen's 151,936-row vocabulary); the prompt length is
a tool-calling chat's (its tool schemas in the system turn). Each repeat is one GRPO
log-probability pass as the trainer runs it: forward through the fused head and backward.
Prints the median seconds of each and their ratio, and checks the numbers agree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=400)
    parser.add_argument("--completion", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch
    import trl.trainer.utils as trl_utils
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl.kernels.chunked_logprob import _use_triton
    from trl.trainer.utils import add_fused_lm_head

    from posttrain.gpu.trl_cpu import score_only_labelled_positions
    from posttrain.models.standin_shape import QWEN_VOCAB_ROWS, STAND_IN_ARCH

    torch.set_num_threads(int(os.environ.get("POSTTRAIN_CPU_THREADS") or 1))
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=QWEN_VOCAB_ROWS, **STAND_IN_ARCH))
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, QWEN_VOCAB_ROWS, (args.batch, args.prompt + args.completion))
    labels = ids.clone()
    labels[:, : args.prompt] = -100

    def one_pass() -> tuple[float, torch.Tensor]:
        model.zero_grad()
        t0 = time.perf_counter()
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
        out.loss.backward()
        return time.perf_counter() - t0, out.log_probs.detach()

    score_only_labelled_positions()
    compact = trl_utils._use_triton
    times: dict[str, list[float]] = {"every position (TRL)": [], "completion only": []}
    logps = {}
    for _ in range(args.repeats):  # interleaved, so both see the same machine
        for label, switch in zip(times, (_use_triton, compact), strict=True):
            trl_utils._use_triton = switch
            seconds, logps[label] = one_pass()
            times[label].append(seconds)
    trl_utils._use_triton = compact
    a, b = logps.values()
    torch.testing.assert_close(a, b)
    print(
        f"stand-in head (hidden {STAND_IN_ARCH['hidden_size']}, vocabulary {QWEN_VOCAB_ROWS:,}), "
        f"batch {args.batch}, prompt {args.prompt} + completion {args.completion} tokens, "
        f"{torch.get_num_threads()} thread(s), forward + backward, median of {args.repeats}:"
    )
    medians = {label: statistics.median(t) for label, t in times.items()}
    for label, seconds in medians.items():
        print(f"  {label:<22} {seconds:6.2f} s")
    full, ours = medians.values()
    print(f"  ratio {full / ours:.1f}x; log-probabilities equal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
