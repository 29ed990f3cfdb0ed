"""GPU check: posttrain's training entrypoint beside plain TRL defaults, on real model shapes.

    python bench/gpu_check.py            # needs one CUDA GPU; about 4 minutes on an H100/H200
    python bench/gpu_check.py --cpu-dry-run   # the same code paths on the tiny model, no GPU

Builds Qwen3-0.6B and Qwen3-1.7B shapes with random weights from the catalog (no download),
then, for each phase, runs the same steps twice in this process:
  posttrain  through posttrain.gpu.train.train (what the Modal function calls): bf16, LoRA
  plain TRL  GRPOTrainer / SFTTrainer with TRL's defaults, bf16, the same LoRA and batch
and prints step time, generation tokens/s, training tokens/s, peak memory and model FLOPs
utilisation (6N FLOPs per trained token), with posttrain/plain ratios. Both arms are timed by
one clock (StepClock: a callback on every Trainer, between CUDA syncs).
Phases: GRPO on the 0.6B shape, 64 completions x 256 tokens per step; SFT on the 1.7B shape,
batch 8 x 2,048 tokens. Random weights never emit EOS, so every completion is full length.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

GRPO_STEPS, SFT_STEPS = 3, 5  # the first step of each is warm-up and is not counted


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


class GenerationTimer:
    """Times every model.generate call and counts the tokens it produced."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.tokens = 0

    def install(self) -> None:
        from transformers.generation.utils import GenerationMixin

        original = GenerationMixin.generate
        timer = self

        def timed(model, *args, **kwargs):
            sync()
            start = time.perf_counter()
            out = original(model, *args, **kwargs)
            sync()
            timer.seconds += time.perf_counter() - start
            prompt = kwargs.get("input_ids", args[0] if args else None)
            timer.tokens += out.numel() - (prompt.numel() if prompt is not None else 0)
            return out

        GenerationMixin.generate = timed

    def reset(self) -> None:
        self.seconds, self.tokens = 0.0, 0


class StepClock:
    """One clock for both arms: every Trainer that trains in this process gets this callback,
    which times each optimizer step between CUDA syncs (posttrain's ReportingCallback and
    TRL's own step_time are not used, so the two arms cannot be timed differently)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def install(self) -> None:
        from transformers import Trainer, TrainerCallback

        clock = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                sync()
                clock._start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                sync()
                clock.times.append(time.perf_counter() - clock._start)

        original = Trainer.train

        def train(trainer, *args, **kwargs):
            trainer.add_callback(Callback())
            return original(trainer, *args, **kwargs)

        Trainer.train = train

    def take(self) -> list[float]:
        times, self.times = self.times, []
        return times


CLOCK = StepClock()


def peak_flops() -> float:
    import torch

    from posttrain.models.catalog import GPU_PERF

    if not torch.cuda.is_available():
        return 1e12  # the CPU dry run: MFU is not meaningful there
    name = torch.cuda.get_device_name(0).upper()
    for gpu, (tflops, _) in GPU_PERF.items():
        if gpu.split("-")[0] in name:
            return tflops * 1e12
    return 989e12


def long_rows(path: Path, n: int, words: int) -> Path:
    """SFT rows whose answers fill the sequence (words of the tiny vocabulary = tokens)."""
    from posttrain.data import gym

    vocab = gym.vocabulary()
    with path.open("w") as f:
        for i in range(n):
            answer = " ".join(vocab[(i * 7 + j) % len(vocab)] for j in range(words))
            f.write(
                json.dumps({"prompt": gym.prompt_text(gym.TOPICS[i % 30]), "reference": answer})
                + "\n"
            )
    return path


def measure(label: str, run, timer: GenerationTimer, params: int, steps: int) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    timer.reset()
    step_times, tokens = run()
    steady = step_times[1:]
    gen_s = timer.seconds * len(steady) / max(1, len(step_times))
    step_s = statistics.mean(steady)
    train_s = max(1e-9, step_s - gen_s / max(1, len(steady)))
    trained_tokens = tokens / len(step_times)
    return {
        "label": label,
        "step_s": step_s,
        "gen_tok_s": timer.tokens / timer.seconds if timer.seconds else None,
        "train_tok_s": trained_tokens / train_s,
        "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
        "mfu": 6 * params * trained_tokens / train_s / peak_flops(),
    }


def posttrain_run(spec: dict, root: Path):
    from posttrain.gpu.train import train
    from posttrain.runs.layout import iter_events
    from posttrain.spec.schema import load_spec

    def run():
        run_dir = root / f"run-gpucheck-{int(time.time() * 1000) % 10**8}"
        status = train(run_dir, load_spec(spec))
        if status != "succeeded":
            cause = next(
                (e.get("cause") for e in iter_events(run_dir) if e["type"] == "result"), None
            )
            sys.exit(f"posttrain run failed: {cause}")
        metrics = [e for e in iter_events(run_dir) if e["type"] == "metrics"]
        tokens = sum(m.get("tokens_per_s", 0) * m["step_time_s"] for m in metrics)
        return CLOCK.take(), tokens

    return run


def plain_trl_run(
    kind: str, model_path: str, data: list[dict], batch: int, length: int, steps: int, out: Path
):
    def run():
        import torch
        from datasets import Dataset
        from peft import LoraConfig
        from transformers import AutoTokenizer, TrainerCallback

        from posttrain.rewards.registry import get_reward

        cuda = torch.cuda.is_available()
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        state = {"tokens": 0.0}

        class Tokens(TrainerCallback):
            def on_log(self, args, s, control, logs=None, **kw):
                state["tokens"] = float((logs or {}).get("num_tokens", state["tokens"]))

        lora = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
        if kind == "grpo":
            from trl import GRPOConfig, GRPOTrainer

            config = GRPOConfig(
                output_dir=str(out),
                bf16=cuda,
                use_cpu=not cuda,
                per_device_train_batch_size=batch,
                num_generations=8,
                max_completion_length=length,
                max_steps=steps,
                logging_steps=1,
                report_to=[],
                save_strategy="no",
            )
            trainer = GRPOTrainer(
                model=model_path,
                reward_funcs=[get_reward("rhyme")],
                args=config,
                train_dataset=Dataset.from_list(data),
                processing_class=tokenizer,
                peft_config=lora,
                callbacks=[Tokens()],
            )
        else:
            from trl import SFTConfig, SFTTrainer

            config = SFTConfig(
                output_dir=str(out),
                bf16=cuda,
                use_cpu=not cuda,
                per_device_train_batch_size=batch,
                max_length=length,
                max_steps=steps,
                logging_steps=1,
                report_to=[],
                save_strategy="no",
            )
            trainer = SFTTrainer(
                model=model_path,
                args=config,
                train_dataset=Dataset.from_list(data),
                processing_class=tokenizer,
                peft_config=lora,
                callbacks=[Tokens()],
            )
        trainer.train()
        return CLOCK.take(), state["tokens"]

    return run


def main() -> None:
    import argparse

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="run every code path on the tiny model on the CPU (no figures)",
    )
    args = parser.parse_args()
    dry = args.cpu_dry_run
    if not dry and not torch.cuda.is_available():
        sys.exit(
            "bench/gpu_check.py needs a CUDA GPU; none is visible here (--cpu-dry-run "
            "checks the code paths without one)"
        )
    from posttrain.data import gym
    from posttrain.gpu.shapes import random_weight_model_path
    from posttrain.gpu.tiny import tiny_model_path
    from posttrain.models.catalog import PRESETS

    def shape(name: str) -> tuple[object, Path, dict]:
        if dry:
            return PRESETS["tiny-local"], tiny_model_path(), {"name": "tiny-local"}
        preset = PRESETS[name]
        return preset, random_weight_model_path(preset), {"name": name, "random_weights": True}

    grpo_batch, grpo_len, sft_batch, sft_words = (8, 16, 4, 60) if dry else (64, 256, 8, 2000)

    timer = GenerationTimer()
    timer.install()
    CLOCK.install()
    started = time.time()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        small, small_path, small_model = shape("Qwen3-0.6B")
        large, large_path, large_model = shape("Qwen3-1.7B")
        device = torch.cuda.get_device_name(0) if not dry else "CPU dry run (tiny model)"
        print(f"{device}: shapes built in {time.time() - started:.0f} s")

        grpo_rows = [
            {"prompt": [{"role": "user", "content": r["prompt"]}], "reference": r["reference"]}
            for r in gym.rows(512)
        ]
        grpo_spec = {
            "model": small_model,
            "dataset": {"builtin": "rhyme-gym", "n_rows": 512},
            "reward": "rhyme",
            "algorithm": {
                "kind": "grpo",
                "steps": GRPO_STEPS,
                "batch_size": grpo_batch,
                "num_generations": 8,
                "max_completion_length": grpo_len,
                "lora": {"r": 16, "alpha": 32, "dropout": 0.05},
                "learning_rate": 1e-5,
                "save_every": 0,
                "traces": {"every": 0, "samples": 2},
            },
            "compute": {"backend": "local"},
        }
        results.append(
            (
                f"GRPO {small.name}, {grpo_batch} completions x {grpo_len} tokens",
                [
                    measure(
                        "posttrain",
                        posttrain_run(grpo_spec, root),
                        timer,
                        small.n_params,
                        GRPO_STEPS,
                    ),
                    measure(
                        "plain TRL",
                        plain_trl_run(
                            "grpo",
                            str(small_path),
                            grpo_rows,
                            grpo_batch,
                            grpo_len,
                            GRPO_STEPS,
                            root / "plain-grpo",
                        ),
                        timer,
                        small.n_params,
                        GRPO_STEPS,
                    ),
                ],
            )
        )

        data = long_rows(root / "long.jsonl", 256, sft_words)
        sft_spec = {
            "model": large_model,
            "dataset": {"path": str(data), "holdout_share": 0.0},
            "reward": "relevance",
            "algorithm": {
                "kind": "sft",
                "steps": SFT_STEPS,
                "batch_size": sft_batch,
                "max_prompt_length": 48,
                "max_completion_length": sft_words,
                "lora": {"r": 16, "alpha": 32, "dropout": 0.05},
                "learning_rate": 1e-5,
                "save_every": 0,
                "traces": {"every": 0, "samples": 0},
            },
            "compute": {"backend": "local"},
        }
        sft_rows = [
            {
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "completion": [{"role": "assistant", "content": r["reference"]}],
            }
            for r in map(json.loads, data.read_text().splitlines())
        ]
        results.append(
            (
                f"SFT {large.name}, {sft_batch} x {48 + sft_words} tokens",
                [
                    measure(
                        "posttrain", posttrain_run(sft_spec, root), timer, large.n_params, SFT_STEPS
                    ),
                    measure(
                        "plain TRL",
                        plain_trl_run(
                            "sft",
                            str(large_path),
                            sft_rows,
                            sft_batch,
                            48 + sft_words,
                            SFT_STEPS,
                            root / "plain-sft",
                        ),
                        timer,
                        large.n_params,
                        SFT_STEPS,
                    ),
                ],
            )
        )

    for phase, (ours, plain) in results:
        print(f"\n{phase}")
        print(
            f"  {'':10} {'step s':>8} {'gen tok/s':>10} {'train tok/s':>12} {'peak GB':>8} "
            f"{'MFU':>6}"
        )
        for r in (ours, plain):
            gen = f"{r['gen_tok_s']:,.0f}" if r["gen_tok_s"] else "-"
            print(
                f"  {r['label']:10} {r['step_s']:8.2f} {gen:>10} {r['train_tok_s']:12,.0f} "
                f"{r['peak_gb']:8.1f} {r['mfu']:6.1%}"
            )
        print(
            f"  posttrain vs plain: step time {plain['step_s'] / ours['step_s']:.2f}x as fast, "
            f"training tokens/s {ours['train_tok_s'] / plain['train_tok_s']:.2f}x"
        )
    print(f"\ntotal {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
