"""A local run's start with and without the fork server, side by side: the same 2-step run of
the tiny model launched N times each way, interleaved, one run at a time.

    python bench/trainer_start.py [--runs 5]

Prints, per way, the median seconds from `launch` to the run's result and from the trainer's
start to its end (the supervisor's record), then the ratios. Runs in a fresh POSTTRAIN_HOME
with one thread per trainer, as the tests run.

Measured (2026-12-03, 2 quiet cores, AMD EPYC, `--runs 5`): fork server median 1.82 s to the
result, trainer process 1.69 s; new interpreter 8.21 s and 9.88 s (its trainer lives ~1.7 s
past its result, tearing torch down); 4.5x and 5.8x. Side by side the same day, the
lifecycle tests (test_server, test_training, test_queue, test_cli_runs, test_false_deaths,
test_jobs, test_groups: 42 tests, -n 2 each, both suites at once on the 2 cores) took 239 s
with the fork server and 306 s with POSTTRAIN_FORKSERVER=0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("POSTTRAIN_HOME", tempfile.mkdtemp(prefix="posttrain-start-bench-"))
os.environ.setdefault("POSTTRAIN_CPU_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SPEC = {
    "model": "tiny-local",
    "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "system_prompt": "answer in rhyme"},
    "reward": "rhyme",
    "algorithm": {
        "steps": 2,
        "lora": None,
        "batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 16,
        "save_every": 0,
        "traces": {"every": 0, "samples": 2},
    },
}


def one_run(seed: int) -> tuple[float, float]:
    """Seconds from launch to the result, and from the trainer's start to its end."""
    from posttrain.runs.layout import FINAL_STATUSES, PROCESS, read_json, runs_root
    from posttrain.tools.launch import launch
    from posttrain.tools.runs import get_run

    spec = {**SPEC, "algorithm": {**SPEC["algorithm"], "seed": seed}}
    started = time.perf_counter()
    run_id = launch(spec).run_id
    while get_run(run_id).status not in FINAL_STATUSES:
        time.sleep(0.05)
    took = time.perf_counter() - started
    status = get_run(run_id).status
    if status != "succeeded":
        sys.exit(f"{run_id} {status}: {get_run(run_id).cause}")
    proc = runs_root() / run_id / PROCESS
    while "ended_at" not in read_json(proc):
        time.sleep(0.05)
    info = read_json(proc)
    return took, info["ended_at"] - info["trainer_started_at"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from posttrain.runs import forkserver

    key = forkserver.server_key(dict(os.environ))
    forkserver.start_server(key)
    deadline = time.time() + 120
    while not forkserver.listening(key):
        if time.time() > deadline:
            sys.exit("the fork server did not start within 120 s")
        time.sleep(0.2)
    print(f"home {os.environ['POSTTRAIN_HOME']}; fork server {key} ready; {args.runs} runs each")
    results: dict[str, list[tuple[float, float]]] = {"fork server": [], "new interpreter": []}
    for i in range(args.runs):
        for way, flag in (("fork server", "1"), ("new interpreter", "0")):
            os.environ["POSTTRAIN_FORKSERVER"] = flag
            results[way].append(one_run(seed=i))
            took, trainer = results[way][-1]
            print(f"  {way:<16} run {i}: {took:5.2f} s to the result, trainer {trainer:5.2f} s")
    print()
    medians = {}
    for way, rows in results.items():
        medians[way] = (
            statistics.median(r[0] for r in rows),
            statistics.median(r[1] for r in rows),
        )
        result, trainer = medians[way]
        print(f"{way:<16} median {result:5.2f} s to the result, trainer {trainer:5.2f} s")
    fork, new = medians["fork server"], medians["new interpreter"]
    print(
        f"ratio (new interpreter / fork server): {new[0] / fork[0]:.2f}x to the result, "
        f"{new[1] / fork[1]:.2f}x the trainer"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
