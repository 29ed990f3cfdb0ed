"""check_reward of rhyme_relevance with and without the embedding cache, side by side.

    python bench/check_reward.py [--rounds 3]

One process, the MiniLM embedder loaded first (its load is timed on its own); then rounds
alternate: the cache off (CACHED_VECTORS = 0, so nothing outlives one reward call: how it was
before the cache) and on (emptied before the check, so each check starts cold). On the bundled
rows (examples/rhyme_qa.jsonl), honest answers from the verse column.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from posttrain.rewards import relevance
    from posttrain.tools.reward_check import check_reward

    t = time.perf_counter()
    relevance._load(relevance.default_model(), None)
    print(f"embedder load (import + MiniLM): {time.perf_counter() - t:.2f} s")
    data = str(ROOT / "examples" / "rhyme_qa.jsonl")
    kept = relevance.CACHED_VECTORS
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            relevance.CACHED_VECTORS = 0 if mode == "off" else kept
            relevance._VECTORS.clear()
            t = time.perf_counter()
            check_reward("rhyme_relevance", data=data, honest_column="verse")
            times[mode].append(time.perf_counter() - t)
    for mode, values in times.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"cache {mode:3}: median {statistics.median(values):.2f} s  ({shown})")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
