"""The TRL trainers posttrain runs: GRPO and SFT with peft LoRA, reporting to the run directory.

`run_grpo` and `run_sft` train (posttrain.gpu.phases picks by the spec's kind); `warmstart` is
the SFT pass before GRPO. All build
TRL's own trainers with the spec's settings, the device's precision, and posttrain's
callbacks (metrics, proof step, traces, cancellation).
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.toolcalls import as_text
from posttrain.gpu.callback import ReportingCallback
from posttrain.gpu.models import Device
from posttrain.gpu.ranks import device_batch, rank
from posttrain.gpu.reporter import (
    ROW,
    Reporter,
    TracingReward,
    renderer,
    trace_steps,
)
from posttrain.gpu.trl_cpu import score_only_labelled_positions
from posttrain.models.precision import trained_role
from posttrain.rewards.base import Reward
from posttrain.rewards.guards import score_rows
from posttrain.spec.schema import RunSpec

SEQUENCE_OVERFLOW_TOLERANCE = 0.01  # share of SFT rows over max_length dropped, not refused
TRAINED_TEXT_CHARS = 20_000  # a trace keeps at most this much of a row's training text
# The spec field an SFT phase's batch comes from (the batch of all GPUs together)
BATCH_FIELD = {"train": "algorithm.batch_size", "warmstart": "algorithm.warmstart.batch_size"}


@dataclass
class Job:
    """What one training phase works on: the spec, where the model starts, its tokenizer and
    rows, where checkpoints go, and who it reports to."""

    spec: RunSpec
    model_path: str
    tokenizer: Any
    rows: list[dict[str, Any]]
    out: Path
    reporter: Reporter
    device: Device
    reward: Reward | None
    holdout: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def but(self, **changes: Any) -> Job:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class SftSettings:
    phase: str  # train or warmstart: what the metrics and traces are filed under
    steps: int
    learning_rate: float
    batch_size: int
    scheduler: str
    lora: bool
    warmup_steps: int = 0


def recompute_activations(job: Job) -> bool:
    """Gradient checkpointing (TRL's default) on a GPU, where activations bound the batch, and
    in a dry run, which proves the GPU's path (LoRA under checkpointing needs inputs that
    require grad). A real run on the CPU keeps its activations instead: memory is not what
    binds there, and the recomputed forward pass is time. Same losses either way: the demo's
    30 steps gave reward, loss and KL equal to 4 digits, and took 245 s against 373 s
    side by side (/tmp/exp/ab.py, 2026-12-02)."""
    return job.device.cuda or job.spec.model.stand_in


def schedule(a: Any) -> dict[str, Any]:
    """The learning rate's schedule of the main phase, as every trainer's config takes it."""
    return {
        "lr_scheduler_type": with_warmup(a.lr_scheduler, a.warmup_steps or 0),
        "warmup_steps": a.warmup_steps or 0,
    }


def with_warmup(scheduler: str, warmup_steps: int) -> str:
    """transformers' name for a schedule with its warmup: its 'constant' ignores warmup_steps
    (its linear and cosine rise over them)."""
    return "constant_with_warmup" if warmup_steps and scheduler == "constant" else scheduler


def common_config(job: Job, steps: int, save: bool) -> dict[str, Any]:
    """The TrainingArguments GRPO and SFT share."""
    a = job.spec.algorithm
    return {
        "output_dir": str(job.out),
        "max_steps": steps,
        "logging_steps": 1,
        "save_strategy": "steps" if save and a.save_every else "no",
        "save_steps": a.save_every or 1,
        "report_to": [],
        "disable_tqdm": True,
        "seed": a.seed,
        "gradient_checkpointing": recompute_activations(job),
        # fp32 master weights for a full fine-tune, LoRA's base in bf16 (models.precision)
        "model_init_kwargs": job.device.model_kwargs(
            trained_role(job.spec.algorithm.lora is not None)
        ),
        **job.device.trainer_kwargs(),
    }


def sft_examples(job: Job) -> tuple[list[dict[str, Any]], str]:
    """The rows as the trainer reads them, each rendered on its own (posttrain.gpu.sft_text):
    token ids, labels (-100 where no loss) and the row's index; and how they were rendered.
    Rows longer than the trainer's max_length are dropped with a warning, never truncated."""
    from posttrain.gpu.sft_text import SftRenderer

    spec, a = job.spec, job.spec.algorithm
    family = spec.model.family
    render = SftRenderer(
        job.tokenizer,
        a.sft_loss,
        spec.model.template_kwargs(),
        family.template if family else None,
    )
    limit = sft_max_length(spec)
    examples, lengths = [], []
    for i, row in enumerate(job.rows):
        ids, labels = render.encode(row)
        lengths.append(len(ids))
        if len(ids) <= limit:
            examples.append({"input_ids": ids, "labels": labels, ROW: i})
    over = len(job.rows) - len(examples)
    if over > SEQUENCE_OVERFLOW_TOLERANCE * len(job.rows):
        raise ConfigError(
            f"{over} of {len(job.rows)} rows are longer than max_prompt_length + "
            f"max_completion_length = {limit} tokens (longest {max(lengths)}), and SFT trains on "
            f"whole rows; raise algorithm.max_completion_length or filter long rows with "
            f"dataset.filters"
        )
    if over:
        job.reporter.log(f"dropped {over} rows over {limit} tokens", level="warning")
    return examples, render.described


def sft_max_length(spec: RunSpec) -> int:
    return spec.algorithm.max_prompt_length + spec.algorithm.max_completion_length


def sft_trainer(
    job: Job,
    settings: SftSettings,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """TRL's SFTTrainer on the rows' own token ids and labels (nothing nested reaches a
    datasets table), with posttrain's callbacks; not trained yet."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    score_only_labelled_positions()  # the prompt's positions cost only time on the CPU
    spec, rows, tokenizer = job.spec, job.rows, job.tokenizer
    phase, steps = settings.phase, settings.steps
    a = spec.algorithm
    examples, described = sft_examples(job)
    job.reporter.log(f"{phase} SFT: {described}")
    config = SFTConfig(
        per_device_train_batch_size=device_batch(settings.batch_size, BATCH_FIELD[phase]),
        learning_rate=settings.learning_rate,
        lr_scheduler_type=with_warmup(settings.scheduler, settings.warmup_steps),
        warmup_steps=settings.warmup_steps,
        max_length=sft_max_length(spec),
        **common_config(job, steps, save=phase == "train"),
    )
    steps_to_trace = trace_steps(a.traces, steps)
    traced: list[int] = []
    trained: list[str | None] = []

    def trace_step(step: int) -> None:
        if step in steps_to_trace:
            picked = [rows[i] for i in traced]
            trace_samples(job, trainer.model, picked, step, phase, trained)

    callback = ReportingCallback(job.reporter, phase, on_step=trace_step, proof=proof)
    trainer = SFTTrainer(
        model=job.model_path,
        args=config,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        peft_config=lora_config(spec) if settings.lora else None,
        callbacks=[callback, *held_out(job, phase), *extra_callbacks],
    )
    silence_printer(trainer)
    # traces show the trainer's own examples of their rows, decoded, loss spans marked
    traced[:], trained[:] = trained_texts(trainer, tokenizer, a.traces.samples)
    return trainer


def trained_texts(trainer: Any, tokenizer: Any, n: int) -> tuple[list[int], list[str | None]]:
    """The first n rows of the trainer's prepared dataset: their row indices, and the exact
    text each trains on (decoded from its input ids) with the loss-bearing spans marked."""
    from posttrain.gpu.sft_text import decode_trained

    dataset = trainer.train_dataset
    rows = list(dataset[ROW])
    picked = [dataset[i] for i in sorted(range(len(rows)), key=rows.__getitem__)[:n]]
    texts = [decode_trained(tokenizer, e["input_ids"], e["labels"]).marked for e in picked]
    return [e[ROW] for e in picked], [_clip_trained(t) for t in texts]


def _clip_trained(text: str) -> str:
    return text if len(text) <= TRAINED_TEXT_CHARS else text[:TRAINED_TEXT_CHARS] + "..."


def run_sft(
    job: Job,
    settings: SftSettings,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """SFT on the rows' rendered conversations, the loss where algorithm.sft_loss says."""
    trainer = sft_trainer(job, settings, extra_callbacks, proof)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def trace_samples(
    job: Job,
    model: Any,
    rows: list[dict[str, Any]],
    step: int,
    phase: str,
    trained: list[str | None] | None = None,
) -> None:
    """Sample one completion per row and keep it as a trace (SFT has no rollouts of its own),
    with the exact text the row trains on."""
    from posttrain.gpu.generate import sample

    spec, tokenizer = job.spec, job.tokenizer
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
    if job.reward is not None:
        scores = score_rows(job.reward, completions, rows)
        rewards = list(scores.rewards)
        components = [scores.row(i) for i in range(len(rows))]
    trained = trained or [None] * len(rows)
    job.reporter.trace(
        step,
        [
            {
                "step": step,
                "idx": i,
                "group": i,
                "prompt": r["prompt_text"],
                "rendered": render(r["prompt"], r.get("tools")),
                "trained": trained[i],
                "completion": completions[i],
                "reward": rewards[i],
                "components": components[i],
                "reference": as_text(r.get("reference")),
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
    job: Job,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    from datasets import Dataset
    from trl import GRPOTrainer

    score_only_labelled_positions()  # the prompt's positions cost only time on the CPU
    spec, tokenizer, reporter = job.spec, job.tokenizer, job.reporter
    assert job.reward is not None
    a = spec.algorithm
    env: dict[str, Any] = {}
    describe = None
    if spec.environment is not None:  # multi-turn episodes: posttrain.gpu.environment
        from posttrain.gpu.environment import EpisodeDescriber, check_template, environment_class

        check_template(tokenizer, spec.model.name)
        env = {"environment_factory": environment_class(spec, job.rows)}
        describe = EpisodeDescriber(tokenizer, spec.model.template_kwargs())
    # Only the prompts (uniform {role, content} messages) and each row's index go into the
    # datasets table: the reward reads the other columns from the rows themselves, so a column
    # of dicts (or of mixed JSON values) reaches it as written, never unified across rows.
    dataset = Dataset.from_list([{"prompt": r["prompt"], ROW: i} for i, r in enumerate(job.rows)])
    tracing = TracingReward(
        job.reward,
        reporter,
        trace_steps(a.traces, a.steps),
        a.traces.samples,
        a.num_generations,
        render=renderer(tokenizer, spec.model.template_kwargs()),
        rows=job.rows,
        describe=describe,
    )
    trainer = GRPOTrainer(
        model=job.model_path,
        reward_funcs=[tracing],
        args=grpo_config(job),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(spec) if a.lora else None,
        callbacks=[
            ReportingCallback(reporter, "train", tracing=tracing, proof=proof),
            *held_out(job, "train"),
            *extra_callbacks,
        ],
        **env,
    )
    job.device.hold_reference_frozen(trainer)  # beta > 0, full fine-tune: TRL loaded it in fp32
    silence_printer(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def grpo_config(job: Job) -> Any:
    """TRL's GRPOConfig for the spec. Its batch is this process's share of the spec's (the
    batch of all GPUs together, posttrain.spec.batch); TRL's generation batch, the share x the
    process count, is then the spec's batch, whole prompt groups."""
    from trl import GRPOConfig

    spec, a = job.spec, job.spec.algorithm
    environment = spec.environment
    turns = {"max_tool_calling_iterations": environment.max_turns} if environment else {}
    return GRPOConfig(
        per_device_train_batch_size=device_batch(a.batch_size, groups=a.num_generations),
        num_generations=a.num_generations,
        max_completion_length=a.max_completion_length,
        temperature=a.temperature,
        learning_rate=a.learning_rate,
        **schedule(a),
        beta=a.beta,
        chat_template_kwargs=spec.model.template_kwargs(),
        remove_unused_columns=False,
        **turns,
        **common_config(job, a.steps, save=True),
    )


def held_out(job: Job, phase: str) -> list[Any]:
    """The held-out evaluation callback, where the spec asks for one (main phase only)."""
    from posttrain.gpu.heldout import HeldOutEval

    every = job.spec.algorithm.eval_every
    if phase != "train" or not every or not job.holdout:
        return []
    return [HeldOutEval(job, every)]


def silence_printer(trainer: Any) -> None:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def warmstart(job: Job, run_dir: Path) -> str:
    """The SFT pass before GRPO, on the rows' targets; returns the folder of the model GRPO
    starts from."""
    job.reporter.stage("warmstart")
    a = job.spec.algorithm
    ws = a.warmstart
    assert ws is not None
    settings = SftSettings(
        "warmstart", ws.steps, ws.learning_rate, ws.batch_size, "cosine", a.lora is not None
    )
    warm = job.but(rows=_as_sft(job.rows, job.spec), out=run_dir / "warmstart-work")
    trainer = run_sft(warm, settings)
    path = str(run_dir / "warmstart")
    # GRPO loads a plain model folder (its reference model comes from the same folder),
    # so a LoRA warm-start is merged into the weights first.
    model = trainer.model.merge_and_unload() if a.lora else trainer.model
    if rank() == 0:  # under data parallel the main process writes, the others wait for it
        model.save_pretrained(path)
        job.tokenizer.save_pretrained(path)
        shutil.rmtree(run_dir / "warmstart-work", ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    job.reporter.check_cancel()
    return path


def _as_sft(rows: list[dict[str, Any]], spec: RunSpec) -> list[dict[str, Any]]:
    """GRPO rows with their SFT target as the completion (for the warm-start). In an
    environment with a demonstration column: each row's demonstration played through the
    environment (posttrain.gpu.environment.demo_episodes), the episode's whole format."""
    if spec.environment is not None and spec.environment.demo_column:
        from posttrain.gpu.environment import demo_episodes

        return demo_episodes(spec, rows)
    column = spec.dataset.target_column
    return [
        {**r, "completion": [{"role": "assistant", "content": str(r.get(column) or "")}]}
        for r in rows
    ]
