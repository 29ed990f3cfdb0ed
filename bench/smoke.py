"""Wall time of local smoke runs from a cold process, with their breakdown.

    python bench/smoke.py [--only demo|dry-run] [--reward rhyme_relevance]

demo:    the tiny-local smoke run (proof step + 4 GRPO steps on the rhyme gym). Goal: <= 30 s.
dry-run: the dry run of a user's own spec: Qwen3-4B, an alpaca-style JSONL with unicode,
         a system prompt, rhyme_relevance, GRPO with LoRA. It runs on the Qwen3-4B stand-in
         with the real tokenizer (converted from the embedded vocabulary: cold) through the
         proof step, 4 steps, a checkpoint and a resume step, then evaluate's generation.
         Goal (issue 11): <= 60 s from a cold process to the end of the proof step + 4 steps.

Both start through the local backend exactly as `posttrain` starts one, with a fresh cache
folder, so building the model (and converting the tokenizer) is in the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ALPACA = [
    ("Give three tips for staying healthy.", "Eat well, sleep enough, and move every day."),
    ("Pourquoi le ciel est-il bleu ?", "L'air diffuse la lumière bleue plus que la rouge."),
    ("東京はどこの首都ですか？", "Tokyo is the capital of Japan."),
    ("How do plants make food?", "By photosynthesis: sunlight, water and carbon dioxide."),
]


def demo_spec(reward: str, folder: Path) -> tuple[dict, str]:
    return {
        "dataset": {"builtin": "rhyme-gym", "n_rows": 200, "system_prompt": "answer in rhyme"},
        "reward": {"name": reward},
        "algorithm": {
            "steps": 5,
            "lora": None,
            "learning_rate": 5e-4,
            "max_completion_length": 40,
            "save_every": 0,
            "traces": {"every": 0, "samples": 4},
        },
    }, "launch"


def dry_run_spec(reward: str, folder: Path) -> tuple[dict, str]:
    rows = [
        {"instruction": f"{q} ({i})", "input": "", "output": a}
        for i, (q, a) in enumerate(ALPACA * 10)
    ]
    data = folder / "alpaca.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return {
        "model": "Qwen3-4B",
        "dataset": {
            "path": str(data),
            "prompt_template": "{instruction}",
            "reference_column": "output",
            "system_prompt": "Answer every question in rhyming couplets.",
        },
        "reward": {"name": reward},
        "algorithm": {"steps": 300, "batch_size": 64, "num_generations": 8},
        "compute": {"backend": "modal", "gpu": "H100"},
    }, "smoke"


def run(kind: str, reward: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POSTTRAIN_HOME"] = str(Path(tmp) / "home")
        os.environ["POSTTRAIN_CACHE"] = str(Path(tmp) / "cache")  # cold: models are built
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from posttrain.runs.layout import iter_events
        from posttrain.tools.launch import launch, smoke_run
        from posttrain.tools.runs import get_run

        spec, how = (demo_spec if kind == "demo" else dry_run_spec)(reward, Path(tmp))
        t0 = time.time()
        run_id = (launch(spec) if how == "launch" else smoke_run(spec)).run_id
        while get_run(run_id).status not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.2)
        wall = time.time() - t0
        detail = get_run(run_id, verbose=True)
        events = list(iter_events(Path(detail.run_dir)))

    if detail.status != "succeeded":
        print(json.dumps({"status": detail.status, "cause": detail.cause}))
        sys.exit(1)
    at: dict[str, float] = {}  # first time of each stage ("stage:x") and event type
    for e in events:
        at.setdefault(f"stage:{e['stage']}" if e["type"] == "stage" else e["type"], e["t"])
    steps = {m["step"]: m for m in detail.metrics}
    fifth = next(e["t"] for e in events if e["type"] == "metrics" and e.get("step") == 5)
    rows = [
        ("process start + imports", at["stage:preparing"] - t0),
        ("data preparation", at["stage:loading_model"] - at["stage:preparing"]),
        ("model + tokenizer + preflight", at["stage:proof_step"] - at["stage:loading_model"]),
        ("proof step (trainer set-up + step 1)", at["proof_step"] - at["stage:proof_step"]),
        ("steps 2-5", fifth - at["proof_step"]),
    ]
    if kind == "dry-run":
        rows += [
            ("checkpoint + resume + step 6", at["stage:saving"] - fifth),
            ("saving", at["stage:eval_check"] - at["stage:saving"]),
            ("evaluate's generation (2 held-out)", at["dry_run"] - at["stage:eval_check"]),
        ]
    else:
        rows.append(("saving + result", at["result"] - at["stage:saving"]))
    title = "tiny-local demo smoke" if kind == "demo" else "dry run of a Qwen3-4B user spec"
    print(f"{title} (reward {reward}), {os.cpu_count()} cores:")
    for label, seconds in rows:
        print(f"  {label:40} {seconds:6.2f} s")
    step_times = ", ".join(f"{steps[s]['step_time_s']:.1f}" for s in sorted(steps))
    print(f"  {'step times (s)':40} {step_times}")
    goal = 30 if kind == "demo" else 60
    print(f"  {'cold process -> end of step 5':40} {fifth - t0:6.2f} s  (goal <= {goal} s)")
    print(f"  {'total wall time':40} {wall:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reward", default="rhyme_relevance")
    parser.add_argument("--only", choices=("demo", "dry-run"))
    args = parser.parse_args()
    for kind in ("demo", "dry-run"):
        if args.only in (None, kind):
            run(kind, args.reward)


if __name__ == "__main__":
    main()
