"""Evaluate's answer likelihoods: the logits' peak memory as evaluate computed them before
(every position's logits, upcast to fp32 at once, then cross-entropy) against
posttrain.gpu.likelihood (only the positions that predict an answer token, upcast in chunks),
side by side, at Qwen's 151,936-row vocabulary.

    python bench/eval_logits_memory.py [--batch 2] [--tokens 2048] [--dtype bfloat16]

Counted: the bytes the vocabulary-wide tensors hold at their peak, for evaluate's batch of 8
and for the measured shape. Measured: each way in a process of its own on the dry run's
stand-in shape (hidden 64, the real vocabulary, the model in --dtype as on a GPU), the rise of
its peak resident memory over what it held before the call, and both ways' numbers compared.
The straightforward way at 8 x 2,048 tokens needs ~30 GB: measure it where memory allows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

VOCAB = 151936
EVALUATE_BATCH = 8  # reference_nll's and preference_margins' rows a forward pass
HEAD_TOKENS = 48  # the rest of --tokens is the answer


def counted_before(batch: int, tokens: int) -> int:
    """Every position's logits in fp32, the shifted copy cross-entropy reshapes them into
    (a copy once batch > 1) and its log-softmax: 4 + 4 + 4 bytes a position a row."""
    return batch * tokens * VOCAB * (4 + (4 if batch > 1 else 0) + 4)


def counted_after(batch: int, tokens: int, model_bytes: int) -> int:
    """The kept positions' logits in the model's dtype, and one upcast chunk with its
    log-softmax (4 + 4 bytes)."""
    from posttrain.gpu.likelihood import LOGIT_POSITIONS, UPCAST_POSITIONS

    kept = min(batch * (tokens - HEAD_TOKENS), max(LOGIT_POSITIONS, tokens - HEAD_TOKENS))
    return kept * VOCAB * model_bytes + min(UPCAST_POSITIONS, kept) * VOCAB * 8


def child(way: str, batch: int, tokens: int, dtype: str) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from posttrain.models.standin_shape import STAND_IN_ARCH

    torch.set_num_threads(int(os.environ.get("POSTTRAIN_CPU_THREADS") or 2))
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=VOCAB, **STAND_IN_ARCH)
    model = Qwen3ForCausalLM(config).to(getattr(torch, dtype)).eval()
    g = torch.Generator().manual_seed(1)
    rows = [
        (
            torch.randint(0, VOCAB, (HEAD_TOKENS,), generator=g).tolist(),
            torch.randint(0, VOCAB, (tokens - HEAD_TOKENS,), generator=g).tolist(),
        )
        for _ in range(batch)
    ]
    if way == "before":  # the computation evaluate ran, kept as the tests' oracle
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from tests.gpu.test_likelihood import straightforward as score
    else:
        from posttrain.gpu.likelihood import answer_nll_sums as score
    score(model, 0, [(rows[0][0][:4], rows[0][1][:4])])  # warm up: kernels, allocator
    held = _rss_bytes()
    sums = score(model, 0, rows, EVALUATE_BATCH)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"peak_rise_bytes": peak - held, "sums": sums}))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--child", choices=("before", "after"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.batch, args.tokens, args.dtype)
        return 0

    model_bytes = 2 if args.dtype == "bfloat16" else 4
    measured = {}
    for way in ("before", "after"):  # one after the other: their peaks never overlap
        out = subprocess.run(
            [sys.executable, __file__, "--child", way, *_shape_args(args)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        measured[way] = json.loads(out.strip().splitlines()[-1])
    worst = max(
        abs(a - b) / abs(b)
        for a, b in zip(measured["after"]["sums"], measured["before"]["sums"], strict=True)
    )
    gb = 1e9
    print(f"vocabulary {VOCAB:,} rows, {args.tokens:,} tokens a row ({HEAD_TOKENS} of prompt)")
    print(f"{'':34}{'before':>12}{'after':>12}")
    for batch in sorted({EVALUATE_BATCH, args.batch}):
        print(
            f"{f'counted, batch {batch}':34}"
            f"{counted_before(batch, args.tokens) / gb:>10.2f}GB"
            f"{counted_after(batch, args.tokens, model_bytes) / gb:>10.2f}GB"
        )
    print(
        f"{f'measured, batch {args.batch}, {args.dtype} model':34}"
        f"{measured['before']['peak_rise_bytes'] / gb:>10.2f}GB"
        f"{measured['after']['peak_rise_bytes'] / gb:>10.2f}GB"
    )
    print(f"answer NLL sums agree to a relative {worst:.1e}")
    return 0


def _shape_args(args: argparse.Namespace) -> list[str]:
    return ["--batch", str(args.batch), "--tokens", str(args.tokens), "--dtype", args.dtype]


if __name__ == "__main__":
    sys.exit(main())
