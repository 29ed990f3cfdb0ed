"""An experiment end to end on this machine, and what it costs over running its arms one by one.

The acceptance experiment of issue 36: the demo's spec (tiny model, rhyme gym, SFT warm-start
then GRPO) swept over the learning rate, the demo's 1e-3 against 0 (a control that trains
nothing after its warm-start), 2 seeds each: 4 runs, planned, launched once, queued on the
local backend, then evaluated and compared. It prints, side by side where both are measured
in this run:

- plan: the experiment planned at once, against its 4 run specs planned one by one;
- launch: the one call's latency, and the queue's gaps (a run's start after the one before it
  ended: what the experiment adds to the runs' own time);
- training: the wall time from launch to the last run's end, against the sum of the runs' own
  durations;
- evaluate: the experiment's evaluation (every arm, then the comparison), and the ranking.

    python bench/experiment.py [--steps 250] [--warmstart-steps 250] [--max-tasks 200]

Measured 2026-12-07 (2 quiet cores of an AMD EPYC; defaults, a fresh POSTTRAIN_HOME; the
demo's rate now warms up over its first 25 steps, docs/demo.md):

    plan: experiment 0.03 s; its 4 runs one by one 0.05 s
    launch: 0.34 s, started exp-261207-080438-8bdc
    training: 706 s wall from launch to the last end; the runs' own 671 s; first start 9.2 s
      after launch; queue gaps 8.5, 8.0, 8.9 s (median 8.5 s)
    evaluate: 46 s for 4 runs, 186 tasks
      1. learning_rate=0.001: reward 0.635 (seeds 0.643, 0.627); vs base unproven: improved
         (the metric is the training reward itself); best
      2. learning_rate=0: reward 0.075 (seeds 0.085, 0.064); vs base unproven: within_noise
         (...); behind by 0.560 [0.524, 0.597], p 0.0000, beyond noise True
      verdict: unproven: best_beyond_noise (learning_rate=0.001) (the metric is the training
         reward itself)

Before the warmup (same day and machine), seed 1 of the 1e-3 arm never rhymed (0.021 against
seed 0's 0.687): 1e-3 still ranked first, 0.354 against 0.075, but within noise (behind by
0.279, 95% CI -0.646..1.205: two seeds that far apart leave the arm's own spread unknown).
On 2026-12-04 (the torch build of that day, the statistics of that day): 621 s of training,
the runs' own 573 s, queue gaps 12-13 s; 1e-3 scored 0.625 (seeds 0.629, 0.621), 0.545
ahead.

A run's start is its first stage event, so each gap holds the next trainer's own start-up
(the first run took 9.2 s from launch to its first stage), so the queue's own share is the
gap less that, about nothing (an estimate from these figures, not measured apart); wall less
the runs' own time is 35 s over 671 s (5%). The arms share the base's passes (the same
warm-started base; docs/experiments.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--warmstart-steps", type=int, default=250)
    parser.add_argument("--max-tasks", type=int, default=200)
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args()
    os.environ.setdefault("POSTTRAIN_HOME", tempfile.mkdtemp(prefix="posttrain-exp-bench-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from posttrain.data.demo_specs import DEMO_LEARNING_RATE, demo_spec
    from posttrain.runs.context import Context
    from posttrain.tools.evaluate import evaluate
    from posttrain.tools.launch import launch
    from posttrain.tools.plan import plan
    from posttrain.tools.runs import get_run

    seeds = [int(s) for s in args.seeds.split(",")]
    spec = demo_spec(steps=args.steps, warmstart_steps=args.warmstart_steps)
    spec["sweep"] = {"algorithm.learning_rate": [DEMO_LEARNING_RATE, 0.0], "seeds": seeds}
    ctx = Context()

    t = time.perf_counter()
    planned = plan(spec, ctx.index)
    plan_s = time.perf_counter() - t
    one_by_one = []
    for arm in planned.experiment.arms:
        for seed in arm.seeds:
            single = demo_spec(steps=args.steps, warmstart_steps=args.warmstart_steps, seed=seed)
            single["algorithm"].update({k.split(".")[-1]: v for k, v in arm.overrides.items()})
            t = time.perf_counter()
            plan(single, ctx.index)
            one_by_one.append(time.perf_counter() - t)
    arms_total = sum(a.cost.expected_s for a in planned.experiment.arms)
    print(
        f"plan: experiment {plan_s:.2f} s; its {len(one_by_one)} runs one by one "
        f"{sum(one_by_one):.2f} s"
    )
    print(
        f"  arms: {[a.name for a in planned.experiment.arms]}, {planned.experiment.runs} runs; "
        f"total expected {planned.cost.expected_s / 60:.1f} min (sum of arms "
        f"{arms_total / 60:.1f} min), ${planned.cost.worst_case_usd:.2f} worst case"
    )

    t0 = time.time()
    t = time.perf_counter()
    started = launch(spec, ctx=ctx)
    print(f"launch: {time.perf_counter() - t:.2f} s, {started.status} {started.group_id}")
    while True:
        details = [get_run(r, ctx=ctx) for r in started.run_ids]
        if all(d.status in ("succeeded", "failed", "cancelled") for d in details):
            break
        time.sleep(2)
    t_end = max(d.ended_at or 0 for d in details)
    spans = sorted((d.started_at or t0, d.ended_at or t_end) for d in details)
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    own = sum(e - s for s, e in spans)
    print(
        f"training: {t_end - t0:.0f} s wall from launch to the last end; the runs' own "
        f"{own:.0f} s; first start {spans[0][0] - t0:.1f} s after launch; queue gaps "
        f"{', '.join(f'{g:.1f}' for g in gaps)} s (median {statistics.median(gaps):.1f} s)"
    )
    print(f"  statuses: {[d.status for d in details]}")

    t = time.perf_counter()
    outcome = evaluate(started.group_id, max_tasks=args.max_tasks, ctx=ctx)
    eval_s = time.perf_counter() - t
    e = outcome.experiment
    print(f"evaluate: {eval_s:.0f} s for {len(started.run_ids)} runs, {e.tasks_used} tasks")
    for arm in e.arms:
        vs = arm.vs_best
        behind = (
            f"behind by {vs.delta:.3f} [{vs.ci_low:.3f}, {vs.ci_high:.3f}], p "
            f"{vs.p_value:.4f}, beyond noise {vs.beyond_noise}"
            if vs
            else "best"
        )
        print(
            f"  {arm.rank}. {arm.arm}: {e.metric} {arm.mean:.3f} (seeds "
            f"{', '.join(f'{m:.3f}' for m in arm.seed_means)}); vs base "
            f"{arm.vs_base['verdict']}; {behind}"
        )
    print(f"  verdict: {e.verdict}")
    print(
        json.dumps(
            {
                "plan_s": plan_s,
                "plan_one_by_one_s": sum(one_by_one),
                "queue_gaps_s": gaps,
                "evaluate_s": eval_s,
                "verdict": e.verdict,
            }
        )
    )


if __name__ == "__main__":
    main()
