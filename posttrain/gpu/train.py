"""The training entrypoint: `train(spec, run_dir)` runs GRPO or SFT with TRL and peft LoRA.

The same function runs in a local subprocess (`python -m posttrain.gpu.train RUN_DIR`) and
inside the Modal function: CUDA with bf16 when a GPU is present, the CPU otherwise. It
assumes nothing about the machine beyond the run directory, and reports everything there.

Stages: preparing -> loading_model -> [warmstart] -> proof_step -> training -> saving ->
succeeded | failed | cancelled. Before step 1 it refuses work that would waste GPU time: rows
that do not render through the chat template, prompts over the length limit, a reward that
is constant on the references.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.dataset import Prepared, prepare
from posttrain.errors import ConfigError
from posttrain.gpu.reporter import (
    Cancelled,
    Reporter,
    ReportingCallback,
    TracingReward,
    quiet_libraries,
    spread,
    trace_steps,
)
from posttrain.rewards.base import Reward
from posttrain.rewards.guards import checked_scores
from posttrain.rewards.probes import Distribution
from posttrain.rewards.registry import get_reward
from posttrain.runs.layout import HOLDOUT, SPEC
from posttrain.spec import RunSpec, load_spec

PROMPT_OVERFLOW_TOLERANCE = 0.01  # share of prompts over the limit that are dropped, not refused


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


def resolve_model(spec: RunSpec) -> str:
    """A local folder (or hub id) that from_pretrained can load for the spec's model."""
    preset = spec.model.preset
    if preset is not None and preset.name == "tiny-local":
        from posttrain.gpu.tiny import tiny_model_path

        return str(tiny_model_path())
    if preset is not None and spec.model.random_weights:
        from posttrain.gpu.shapes import random_weight_model_path

        return str(random_weight_model_path(preset))
    if preset is not None:
        return preset.hf_repo or preset.name
    return str(Path(spec.model.name).expanduser())


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def preflight(
    spec: RunSpec, data: Prepared, tokenizer: Any, reward: Reward | None, reporter: Reporter
) -> Prepared:
    """Refuse, before step 1, what would waste a run; returns the rows that fit."""
    kwargs = spec.model.template_kwargs()
    missing = [c for c in (reward.columns if reward else ()) if c not in data.train[0]]
    if missing:
        raise ConfigError(
            f"reward '{spec.reward.name}' needs dataset column(s) {missing}, which the rows lack "
            f"(columns: {sorted(data.train[0])}); set dataset.reference_column or the reward's "
            f"column parameter"
        )
    lengths = []
    for i, row in enumerate(data.train):
        try:
            text = tokenizer.apply_chat_template(
                row["prompt"],
                tokenize=False,
                add_generation_prompt=True,
                tools=row.get("tools"),
                **kwargs,
            )
        except Exception as exc:  # jinja and template errors come in many types
            raise ConfigError(
                f"row {i} (id {row['id']}) does not render through the model's chat template: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        lengths.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    limit = spec.algorithm.max_prompt_length
    over = [i for i, n in enumerate(lengths) if n > limit]
    if len(over) > PROMPT_OVERFLOW_TOLERANCE * len(lengths):
        raise ConfigError(
            f"{len(over)} of {len(lengths)} prompts are longer than max_prompt_length={limit} "
            f"tokens (longest {max(lengths)}); raise algorithm.max_prompt_length or filter long "
            f"rows with dataset.filters"
        )
    if over:
        reporter.log(f"dropped {len(over)} prompts over {limit} tokens", level="warning")
        skip = set(over)
        data.train = [r for i, r in enumerate(data.train) if i not in skip]
    reporter.log(
        f"{len(data.train)} training rows, {len(data.holdout)} held out, "
        f"{data.dropped_by_filters} dropped by filters; prompt tokens p50 "
        f"{int(statistics.median(lengths))}, max {max(lengths)}"
    )
    if reward is not None and spec.algorithm.kind == "grpo":
        check_reward_signal(spec, data, reward)
    return data


def check_reward_signal(spec: RunSpec, data: Prepared, reward: Reward) -> None:
    """A reward that scores references, echoed prompts and empty answers all alike reads the
    wrong field (or nothing): GRPO would learn nothing from it."""
    rows = [data.train[i] for i in spread(len(data.train), 32)]
    columns = {k: [r.get(k) for r in rows] for k in rows[0] if k not in ("prompt", "completion")}
    references = [
        str(r.get("reference") or r.get(spec.dataset.reference_column or "") or "") for r in rows
    ]
    values: list[float] = []
    for responses in (references, [r["prompt_text"] for r in rows], [""] * len(rows)):
        values += checked_scores(
            reward, responses, prompts=[r["prompt"] for r in rows], **columns
        ).rewards
    degenerate = Distribution.of(values).degenerate
    if degenerate:
        raise ConfigError(
            f"reward '{spec.reward.name}' is {degenerate} on references, echoed prompts and empty "
            f"answers alike ({values[0]:.3f}): it probably reads the wrong field or ignores the "
            f"completion. Run `posttrain reward check` on the data before training"
        )


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

    callback = ReportingCallback(reporter, phase, on_step=trace_step)
    trainer = SFTTrainer(
        model=model_path,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(spec) if lora else None,
        callbacks=[callback],
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
    )
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
) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    a = spec.algorithm
    dataset = Dataset.from_list([{k: v for k, v in r.items() if k != "completion"} for r in rows])
    tracing = TracingReward(
        reward, reporter, trace_steps(a.traces, a.steps), a.traces.samples, a.num_generations
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
        callbacks=[ReportingCallback(reporter, "train", tracing=tracing)],
    )
    _silence_printer(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _silence_printer(trainer: Any) -> None:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def train(spec: RunSpec, run_dir: Path) -> str:
    """Run the spec's training in run_dir; returns the final status. Never raises for a run
    that failed: the failure is in the events, with its cause."""
    reporter = Reporter(run_dir)
    reporter.install_signal_handlers()
    try:
        return _train(spec, run_dir, reporter)
    except Cancelled:
        reporter.result("cancelled", cause="cancelled before training finished")
        return "cancelled"
    except Exception as exc:
        reporter.failure(exc)
        return "failed"
    finally:
        reporter.close()


def _train(spec: RunSpec, run_dir: Path, reporter: Reporter) -> str:
    quiet_libraries()
    a = spec.algorithm
    reporter.stage("preparing")
    data = prepare(spec.dataset, a.kind)
    _write_rows(run_dir / HOLDOUT, data.holdout)
    reward = get_reward(spec.reward.name, spec.reward.params)
    reporter.check_cancel()

    reporter.stage("loading_model")
    device = Device.detect()
    model_path = resolve_model(spec)
    tokenizer = load_tokenizer(model_path)
    reporter.log(
        f"model {spec.model.name} from {model_path} on {device.name}"
        f"{' (bf16)' if device.bf16 else ''}; {'LoRA' if a.lora else 'full fine-tune'}"
    )
    data = preflight(spec, data, tokenizer, reward, reporter)
    reporter.check_cancel()

    resume = None
    if spec.resume_from:
        resume, base = resume_source(spec, run_dir)
        model_path = base or model_path
        reporter.log(
            f"resuming run {spec.resume_from} from {resume} (model {model_path}); "
            f"training continues at step {checkpoint_step(resume) + 1}"
        )
    elif a.kind == "grpo" and a.warmstart:
        reporter.stage("warmstart")
        ws = a.warmstart
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
        model_path = str(run_dir / "warmstart")
        # GRPO loads a plain model folder (its reference model comes from the same folder),
        # so a LoRA warm-start is merged into the weights first.
        model = trainer.model.merge_and_unload() if a.lora else trainer.model
        model.save_pretrained(model_path)
        tokenizer.save_pretrained(model_path)
        shutil.rmtree(run_dir / "warmstart-work", ignore_errors=True)
        reporter.check_cancel()

    reporter.stage("proof_step")
    out = run_dir / "checkpoints"
    if a.kind == "grpo":
        trainer = run_grpo(
            spec, model_path, tokenizer, data.train, out, reporter, device, reward, resume
        )
    else:
        trainer = run_sft(
            spec,
            model_path,
            tokenizer,
            data.train,
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
            resume=resume,
        )

    reporter.stage("saving")
    final = run_dir / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    step = trainer.state.global_step
    reporter.checkpoint(step, final)
    if reporter.should_stop() and step < a.steps:
        reporter.result(
            "cancelled", cause=f"cancelled by request after step {step}", step=step, path="final"
        )
        return "cancelled"
    reporter.result("succeeded", step=step, path="final")
    return "succeeded"


def checkpoint_step(path: str | Path) -> int:
    return int(Path(path).name.rsplit("-", 1)[1])


def resume_source(spec: RunSpec, run_dir: Path) -> tuple[str, str | None]:
    """The last checkpoint of the run to resume, and its base model folder (the warm-start
    output when it had one, so the policy and the KL reference start where they did)."""
    source = run_dir.parent / str(spec.resume_from)
    if not source.is_dir():
        raise ConfigError(f"resume_from: run '{spec.resume_from}' is not in {run_dir.parent}")
    checkpoints = sorted((source / "checkpoints").glob("checkpoint-*"), key=checkpoint_step)
    if not checkpoints:
        raise ConfigError(
            f"resume_from: run '{spec.resume_from}' saved no checkpoint (save_every 0, or it "
            f"stopped before the first save); start a new run instead"
        )
    base = source / "warmstart"
    return str(checkpoints[-1]), str(base) if base.is_dir() else None


def _as_sft(rows: list[dict[str, Any]], spec: RunSpec) -> list[dict[str, Any]]:
    """GRPO rows with their SFT target as the completion (for the warm-start)."""
    column = spec.dataset.target_column
    return [
        {**r, "completion": [{"role": "assistant", "content": str(r.get(column) or "")}]}
        for r in rows
    ]


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    """`python -m posttrain.gpu.train RUN_DIR`: train the spec.json found there."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m posttrain.gpu.train RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    status = train(load_spec(run_dir / SPEC), run_dir)
    return 0 if status in ("succeeded", "cancelled") else 1


if __name__ == "__main__":
    sys.exit(main())
