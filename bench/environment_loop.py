"""The whole environment loop on the stand-in, with scripted episodes: rollout, tools, reward,
trace and evaluate, each on posttrain's and TRL's real code, offline, in minutes.

A random stand-in never writes a well-formed tool call, so a dry run alone cannot show TRL's
rollout calling a tool. Here the scripted episode is taught, not faked: one calculator task
(its `demo` column: calculate, then submit_answer), asked by 20 people, is the whole dataset; the
warm-start plays that demonstration through the environment (posttrain.gpu.environment.
demo_episodes) and trains the Qwen3 stand-in on it until the stand-in writes it back. Then:

- rollout: TRL's GRPOTrainer (environment_factory) samples episodes from the stand-in, parses
  its <tool_call> blocks with the Qwen parser, and calls the bounded calculator's tools;
- reward: the calculator's get_reward() pays a submitted right answer;
- trace: sample_traces shows whole episodes (calls, results, final answer, reward);
- evaluate: held-out episodes, base (the warm-start) vs trained, with pass@k and pass^k.

    python bench/environment_loop.py [--warm 80] [--steps 2]

Prints each stage's evidence and the wall time. Runs in a fresh POSTTRAIN_HOME, offline.

Measured (2026-12-02, 2 CPU cores shared with other trainings, nice 19, one thread):

- One prompt asked 8 times (an earlier version of this script, `--warm 100`, run
  run-261202-144526-05f5, 1,372 s): the warm-start's loss went 11.95 -> 0.046 by step 60
  (token accuracy 1.0) -> 0.017 at step 100, at 7-11 s a step. Both GRPO steps sampled 4
  episodes, and every one called calculate("12 * 3"), got "36", called submit_answer(36), got
  "Answer recorded.", answered "36" and was paid 1.0 by get_reward (components environment
  1.0, tool_calls 2, tool_errors 0, turns 3; reward_std 0, so GRPO's loss was 0). The traces
  hold those episodes rendered through Qwen3's real template. evaluate refused the run: its
  held-out prompts were the training prompt, so 0 clean tasks were left.
- 20 askers (this script, `--warm 80`, run run-261202-151039-5eb4, 1,028 s, 13 training rows,
  7 held out): the warm-start's loss ended at 0.16 (token accuracy 0.984). GRPO step 1 paid
  1 of 4 episodes (reward 0.25, a nonzero loss). The other 3 wrote
  `{"expression": "12 * 36}}`, a malformed call: TRL ended the episode, the trace shows a
  failed call, and the reward was 0. evaluate (53 s, 5 clean held-out tasks, k=2, 2 base
  passes) played every episode. Success was 0.0 -> 0.0, pass@1/pass@2/pass^2 0 -> 0, tool
  errors 1.0 -> 1.0 an episode, turns 1.1 -> 1.1, verdict insufficient_data. The stand-in
  did not carry the memorised calls over to names it had not seen. A longer warm-start might;
  that is not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# One task, asked by different people: the demonstration (and the answer) is the same for all,
# and the prompts share no 8-gram, so evaluate keeps the held-out ones as clean tasks.
NAMES = (
    "Ana Ben Chloe Dev Emil Fatima Goran Hana Ivan Jana Kofi Lena Mateo Nora Omar Priya Quinn "
    "Rosa Sami Tariq".split()
)
TASK = {
    "prompt": "{name} asks: 12 eggs a box, 3 boxes?",
    "answer": 36,
    "demo": [
        {"name": "calculate", "arguments": {"expression": "12 * 3"}},
        {"name": "submit_answer", "arguments": {"answer": 36}},
    ],
}


def loop_spec(data: Path, warm: int, steps: int, timeout_s: int = 1800) -> dict[str, Any]:
    """The Qwen3 stand-in in the calculator environment: a long warm-start on the one
    demonstration (full fine-tune, high learning rate), then `steps` GRPO steps."""
    return {
        "name": "stand-in loop: scripted calculator episodes",
        "model": {"name": "Qwen3-0.6B", "stand_in": True},
        "environment": {"name": "calculator", "demo_column": "demo", "max_turns": 3},
        "dataset": {
            "path": str(data),
            "system_prompt": "Use the tools.",
            "reference_column": "answer",
            "holdout_share": 0.4,
        },
        "algorithm": {
            "kind": "grpo",
            "lora": None,
            "learning_rate": 1e-6,
            "steps": steps,
            "batch_size": 4,
            "num_generations": 2,
            "max_prompt_length": 512,
            "max_completion_length": 200,
            "temperature": 0.3,
            "beta": 0.0,
            "save_every": 0,
            "traces": {"every": 1, "samples": 4},
            "warmstart": {"steps": warm, "learning_rate": 1e-2, "batch_size": 1},
        },
        "compute": {"backend": "local", "timeout_s": timeout_s},
    }


def write_task(path: Path) -> Path:
    rows = [
        {**TASK, "id": f"task-{i}", "prompt": TASK["prompt"].format(name=name)}
        for i, name in enumerate(NAMES)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--warm", type=int, default=80, help="SFT warm-start steps")
    p.add_argument("--steps", type=int, default=2, help="GRPO steps")
    args = p.parse_args()
    os.environ.setdefault("POSTTRAIN_HOME", tempfile.mkdtemp(prefix="posttrain-envloop-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    home = Path(os.environ["POSTTRAIN_HOME"])
    home.mkdir(parents=True, exist_ok=True)

    from posttrain.runs.layout import FINAL_STATUSES
    from posttrain.tools import runs as tools
    from posttrain.tools.evaluate import evaluate
    from posttrain.tools.launch import launch

    started = time.time()
    run_id = launch(loop_spec(write_task(home / "task.jsonl"), args.warm, args.steps)).run_id
    print(f"POSTTRAIN_HOME={home}\nrun {run_id} launched", flush=True)
    while (detail := tools.get_run(run_id)).status not in FINAL_STATUSES:
        time.sleep(2)
    print(f"run {run_id}: {detail.status} after {time.time() - started:.0f} s", flush=True)
    if detail.status != "succeeded":
        print(detail.cause)
        return 1
    traces = tools.sample_traces(run_id, steps="first,last")
    for step, rows in traces.steps.items():
        for r in rows:
            e = r.episode or {}
            calls = [(c["name"], c["ok"]) for t in e.get("turns", []) for c in t["calls"]]
            print(f"  trace step {step}: reward {r.reward} calls {calls} final {e.get('final')!r}")
    t = time.time()
    outcome = evaluate(run_id, k=2, base_passes=2, max_tasks=5)
    result = outcome.result
    assert result is not None
    print(f"evaluate ({time.time() - t:.0f} s): {result.verdict}")
    for m in [*result.metrics, *result.unoptimised]:
        print(f"  {m.name}: base {m.base_mean:.3f} -> trained {m.trained_mean:.3f}")
    if result.pass_rates:
        print(f"  pass rates: base {result.pass_rates.base} trained {result.pass_rates.trained}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
