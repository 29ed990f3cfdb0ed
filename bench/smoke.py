"""Wall time of a local smoke run from a cold process, with its breakdown.

    python bench/smoke.py [--reward rhyme_relevance]

A smoke run is the proof step plus 4 GRPO steps on the tiny model, started through the local
backend exactly as `posttrain` starts one. The tiny model is built from scratch (a fresh
cache folder), so "model build" is in the figure. Goal (issue 3): <= 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reward", default="rhyme_relevance")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POSTTRAIN_HOME"] = str(Path(tmp) / "home")
        os.environ["POSTTRAIN_CACHE"] = str(Path(tmp) / "cache")  # cold: the model is built
        from posttrain.runs.layout import iter_events
        from posttrain.tools.launch import launch
        from posttrain.tools.runs import get_run

        spec = {
            "dataset": {"builtin": "rhyme-gym", "n_rows": 200, "system_prompt": "answer in rhyme"},
            "reward": {"name": args.reward},
            "algorithm": {
                "steps": 5,
                "lora": None,
                "learning_rate": 5e-4,
                "max_completion_length": 40,
                "save_every": 0,
                "traces": {"every": 0, "samples": 4},
            },
        }
        t0 = time.time()
        run_id = launch(spec).run_id
        while get_run(run_id).status not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.2)
        wall = time.time() - t0
        detail = get_run(run_id, verbose=True)
        events = list(iter_events(Path(detail.run_dir)))

    if detail.status != "succeeded":
        print(json.dumps({"status": detail.status, "cause": detail.cause}))
        sys.exit(1)
    at = {}  # first time of each stage ("stage:x") and event type
    for e in events:
        at.setdefault(f"stage:{e['stage']}" if e["type"] == "stage" else e["type"], e["t"])
    steps = [m["step_time_s"] for m in detail.metrics]
    rows = [
        ("process start + imports", at["stage:preparing"] - t0),
        ("data preparation", at["stage:loading_model"] - at["stage:preparing"]),
        ("model build + tokenizer + preflight", at["stage:proof_step"] - at["stage:loading_model"]),
        ("proof step (trainer set-up + step 1)", at["proof_step"] - at["stage:proof_step"]),
        ("steps 2-5", sum(steps[1:])),
        ("saving + result", at["result"] - at["stage:saving"]),
    ]
    print(
        f"local smoke run (proof step + 4 GRPO steps, tiny model, reward {args.reward}), "
        f"{os.cpu_count()} cores:"
    )
    for label, seconds in rows:
        print(f"  {label:40} {seconds:6.2f} s")
    print(f"  {'total wall time from a cold process':40} {wall:6.2f} s  (goal <= 30 s)")


if __name__ == "__main__":
    main()
