"""Judge throughput: completions scored per second against a real HTTP endpoint, group mode
against single, without the cache and with it (the same completions again), side by side.

    python bench/judge.py [--prompts 32] [--group 8] [--delay 0.05] [--base-url URL --model M]

By default the endpoint is the rule-based judge of the tests (tests/rewards/judge_server.py),
in its own process, with --delay seconds a request to stand in for a model's latency; give
--base-url and --model to measure your own judge (e.g. `posttrain judge serve`'s, or
transformers serve). Each figure is one pass over prompts x group completions.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="rule-judge")
    args = parser.parse_args()
    os.environ["POSTTRAIN_HOME"] = tempfile.mkdtemp(prefix="judge-bench-")

    from posttrain.rewards.registry import get_reward
    from tests.rewards.judge_server import serving

    prompts = [f"What is {i} + {i + 1}?" for i in range(args.prompts) for _ in range(args.group)]
    answers = [str(2 * i + 1 + j) for i in range(args.prompts) for j in range(args.group)]
    served = contextlib.nullcontext(args.base_url) if args.base_url else serving(delay_s=args.delay)
    print(
        f"{len(answers)} completions ({args.prompts} prompts x {args.group}); endpoint: "
        f"{args.base_url or f'rule judge, {args.delay * 1000:.0f} ms a request'}"
    )
    with served as url:
        for mode in ("group", "single"):
            reward = get_reward(
                "judge",
                {"rubric": f"bench {mode}", "base_url": url, "model": args.model, "mode": mode},
            )
            for label in ("no cache", "cached"):
                start = time.perf_counter()
                scores = reward.score(answers, prompts=prompts)
                took = time.perf_counter() - start
                graded = sum(s is not None for s in scores.rewards)
                usage = reward.usage()
                print(
                    f"{mode:6s} {label:8s}: {len(answers) / took:9.1f} completions/s "
                    f"({took:6.2f} s; {graded} graded; requests so far {usage['requests']}, "
                    f"cache hits {usage['cache_hits']})"
                )


if __name__ == "__main__":
    main()
