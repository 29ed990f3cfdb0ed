"""The TRL trainers posttrain runs: GRPO and SFT with peft LoRA, reporting to the run directory.

`train_phase` runs the spec's algorithm; `warmstart` is the SFT pass before GRPO. Both build
TRL's own trainers with the spec's settings, the device's precision, and posttrain's
callbacks (metrics, proof step, traces, cancellation).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.dataset import Prepared
from posttrain.gpu.reporter import (
    Reporter,
    ReportingCallback,
    TracingReward,
    renderer,
    trace_steps,
)
from posttrain.rewards.base import Reward
from posttrain.rewards.guards import checked_scores
from posttrain.spec import RunSpec


@dataclass
class Device:
    cuda: bool
    bf16: bool
    name: str

    @classmethod
    def detect(cls) -> Device:
        import torch

        if torch.cuda.is_available():
            return cls(True, torch.cuda.is_bf16_supported(), torch.cuda.get_device_name(0))
        return cls(False, False, "cpu")

    def trainer_kwargs(self) -> dict[str, Any]:
        # TRL 1.16 defaults to bf16, which fails on a CPU: say so explicitly either way.
        return {"use_cpu": not self.cuda, "bf16": self.bf16, "fp16": False}

    def model_kwargs(self) -> dict[str, Any]:
        import torch

        return {"dtype": torch.bfloat16 if self.bf16 else torch.float32}


def run_sft(
    spec: RunSpec,
    model_path: str,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    out: Path,
    reporter: Reporter,
    device: Device,
    *,
    phase: str,
    steps: int,
    learning_rate: float,
    batch_size: int,
    scheduler: str,
    lora: bool,
    reward: Reward | None,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """SFT on conversational prompt/completion rows: the loss is on the completion only."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    a = spec.algorithm
    keep = (
        ("prompt", "completion", "tools") if spec.dataset.tools_column else ("prompt", "completion")
    )
    # TRL's SFT takes template arguments per row (its config has no field for them).
    template = spec.model.template_kwargs()
    extra = {"chat_template_kwargs": template} if template else {}
    dataset = Dataset.from_list([{**{k: r[k] for k in keep}, **extra} for r in rows])
    config = SFTConfig(
        output_dir=str(out),
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type=scheduler,
        max_steps=steps,
        max_length=a.max_prompt_length + a.max_completion_length,
        completion_only_loss=True,
        logging_steps=1,
        save_strategy="steps" if a.save_every and phase == "train" else "no",
        save_steps=a.save_every or 1,
        report_to=[],
        disable_tqdm=True,
        seed=a.seed,
        model_init_kwargs=device.model_kwargs(),
        **device.trainer_kwargs(),
    )
    sample_rows = rows[: a.traces.samples]
    steps_to_trace = trace_steps(a.traces, steps)

    def trace_step(step: int) -> None:
        if step in steps_to_trace:
            trace_samples(
                spec, trainer.model, tokenizer, sample_rows, reward, reporter, step, phase
            )

    callback = ReportingCallback(reporter, phase, on_step=trace_step, proof=proof)
    trainer = SFTTrainer(
        model=model_path,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(spec) if lora else None,
        callbacks=[callback, *extra_callbacks],
    )
    _silence_printer(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def trace_samples(
    spec: RunSpec,
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    reward: Reward | None,
    reporter: Reporter,
    step: int,
    phase: str,
) -> None:
    """Sample one completion per row and keep it as a trace (SFT has no rollouts of its own)."""
    from posttrain.gpu.generate import sample

    completions = sample(
        model,
        tokenizer,
        [r["prompt"] for r in rows],
        max_new_tokens=spec.algorithm.max_completion_length,
        temperature=spec.algorithm.temperature,
        template_kwargs=spec.model.template_kwargs(),
        seed=spec.algorithm.seed + step,
        tools=[r.get("tools") for r in rows],
    )
    render = renderer(tokenizer, spec.model.template_kwargs())
    rewards: list[float | None] = [None] * len(rows)
    components: list[dict[str, float]] = [{} for _ in rows]
    if reward is not None:
        columns = {
            k: [r.get(k) for r in rows] for k in rows[0] if k not in ("prompt", "completion")
        }
        scores = checked_scores(reward, completions, prompts=[r["prompt"] for r in rows], **columns)
        rewards = list(scores.rewards)
        components = [scores.row(i) for i in range(len(rows))]
    reporter.trace(
        step,
        [
            {
                "step": step,
                "idx": i,
                "group": i,
                "prompt": r["prompt_text"],
                "rendered": render(r["prompt"], r.get("tools")),
                "completion": completions[i],
                "reward": rewards[i],
                "components": components[i],
                "reference": r.get("reference"),
            }
            for i, r in enumerate(rows)
        ],
        phase=phase,
    )


def lora_config(spec: RunSpec) -> Any:
    from peft import LoraConfig

    lora = spec.algorithm.lora
    assert lora is not None
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def run_grpo(
    spec: RunSpec,
    model_path: str,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    out: Path,
    reporter: Reporter,
    device: Device,
    reward: Reward,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    a = spec.algorithm
    dataset = Dataset.from_list([{k: v for k, v in r.items() if k != "completion"} for r in rows])
    tracing = TracingReward(
        reward,
        reporter,
        trace_steps(a.traces, a.steps),
        a.traces.samples,
        a.num_generations,
        render=renderer(tokenizer, spec.model.template_kwargs()),
    )
    config = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=a.batch_size,
        num_generations=a.num_generations,
        max_completion_length=a.max_completion_length,
        temperature=a.temperature,
        learning_rate=a.learning_rate,
        lr_scheduler_type=a.lr_scheduler,
        beta=a.beta,
        max_steps=a.steps,
        logging_steps=1,
        save_strategy="steps" if a.save_every else "no",
        save_steps=a.save_every or 1,
        report_to=[],
        disable_tqdm=True,
        seed=a.seed,
        model_init_kwargs=device.model_kwargs(),
        chat_template_kwargs=spec.model.template_kwargs(),
        remove_unused_columns=False,
        **device.trainer_kwargs(),
    )
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=[tracing],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(spec) if a.lora else None,
        callbacks=[
            ReportingCallback(reporter, "train", tracing=tracing, proof=proof),
            *extra_callbacks,
        ],
    )
    _silence_printer(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _silence_printer(trainer: Any) -> None:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def train_phase(
    spec: RunSpec,
    model_path: str,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    out: Path,
    reporter: Reporter,
    device: Device,
    reward: Reward,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """The spec's training (GRPO or SFT), from `resume` when given; returns the trainer."""
    a = spec.algorithm
    more = {"resume": resume, "extra_callbacks": extra_callbacks, "proof": proof}
    if a.kind == "grpo":
        return run_grpo(spec, model_path, tokenizer, rows, out, reporter, device, reward, **more)
    return run_sft(
        spec,
        model_path,
        tokenizer,
        rows,
        out,
        reporter,
        device,
        phase="train",
        steps=a.steps,
        learning_rate=a.learning_rate,
        batch_size=a.batch_size,
        scheduler=a.lr_scheduler,
        lora=a.lora is not None,
        reward=reward,
        **more,
    )


def warmstart(
    spec: RunSpec,
    model_path: str,
    tokenizer: Any,
    data: Prepared,
    run_dir: Path,
    reporter: Reporter,
    device: Device,
    reward: Reward,
) -> str:
    """The SFT pass before GRPO; returns the folder of the model GRPO starts from."""
    reporter.stage("warmstart")
    a = spec.algorithm
    ws = a.warmstart
    assert ws is not None
    trainer = run_sft(
        spec,
        model_path,
        tokenizer,
        _as_sft(data.train, spec),
        run_dir / "warmstart-work",
        reporter,
        device,
        phase="warmstart",
        steps=ws.steps,
        learning_rate=ws.learning_rate,
        batch_size=ws.batch_size,
        scheduler="cosine",
        lora=a.lora is not None,
        reward=reward,
    )
    path = str(run_dir / "warmstart")
    # GRPO loads a plain model folder (its reference model comes from the same folder),
    # so a LoRA warm-start is merged into the weights first.
    model = trainer.model.merge_and_unload() if a.lora else trainer.model
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    shutil.rmtree(run_dir / "warmstart-work", ignore_errors=True)
    reporter.check_cancel()
    return path


def _as_sft(rows: list[dict[str, Any]], spec: RunSpec) -> list[dict[str, Any]]:
    """GRPO rows with their SFT target as the completion (for the warm-start)."""
    column = spec.dataset.target_column
    return [
        {**r, "completion": [{"role": "assistant", "content": str(r.get(column) or "")}]}
        for r in rows
    ]
