"""One rank of bench/gpu_first_contact.py's step-agreement check: prints one JSON line.

python -m torch.distributed.run --nproc_per_node 2 bench/_agreement_rank.py nccl
python bench/_agreement_rank.py nccl single     # one GPU: a group of one
python bench/_agreement_rank.py gloo single     # the CPU
"""

from __future__ import annotations

import json
import os
import sys
import tempfile


def main() -> None:
    import torch
    import torch.distributed as dist

    from posttrain.gpu.callback import agreed, reduce_device

    backend = sys.argv[1]
    single = len(sys.argv) > 2 and sys.argv[2] == "single"
    if single:
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group(backend, store=store, rank=0, world_size=1)
    else:
        dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    device = reduce_device(str(dist.get_backend()))
    refused = None
    if backend == "nccl":  # the bug: a CPU tensor on an NCCL group
        try:
            dist.all_reduce(torch.tensor([1]))
            refused = False
        except Exception as exc:
            refused = f"{type(exc).__name__}: {str(exc)[:160]}"
    value = torch.tensor([rank + 1], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    reduced = int(value.item()) == world
    one_says_stop = agreed(rank == world - 1)
    none_says = agreed(False)
    ok = reduced and one_says_stop and not none_says and (backend != "nccl" or bool(refused))
    print(
        json.dumps(
            {
                "rank": rank,
                "world": world,
                "backend": str(dist.get_backend()),
                "reduce_device": device,
                "cpu_tensor_refused": refused,
                "reduced_on_device": reduced,
                "agreed_when_one_says_stop": one_says_stop,
                "agreed_when_none_does": none_says,
                "ok": ok,
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
