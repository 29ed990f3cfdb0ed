"""What TRL's preference trainers (DPO, KTO) share here: given the rows' own token ids (the
rendering `data check` shows), build the trainer with posttrain's callbacks and LoRA, keep
TRL's filter of prompts that fill max_length (and say what it dropped), and trace the
trainer's own examples of their rows, decoded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.gpu.callback import ReportingCallback
from posttrain.gpu.reporter import ROW, trace_steps
from posttrain.gpu.trainers import Job, held_out, lora_config, silence_printer, trace_samples

TRAINED_SHOWN = 3  # examples whose decoded tokens each trace carries


def encoded_examples(job: Job, encode: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """Each row's token ids (`encode(row)`, with `.as_example()`) and its index in the rows; a
    row the chat template refuses is named."""
    examples = []
    for i, row in enumerate(job.rows):
        try:
            ids = encode(row)
        except Exception as exc:  # jinja and template errors come in many types
            raise ConfigError(
                f"row {row.get('id')!r} does not render through the chat template "
                f"({type(exc).__name__}: {exc}); `posttrain data check` lists such rows"
            ) from None
        examples.append({**ids.as_example(), ROW: i})
    return examples


def reference_words(lora: bool) -> str:
    return "LoRA, reference: the base with the adapter off" if lora else "full, reference: a copy"


def pretokenized_trainer(
    job: Job,
    trainer_class: type,
    config: Any,
    examples: list[dict[str, Any]],
    what: str,
    shown: Callable[[Any, dict[str, Any]], str],
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> tuple[Any, Any]:
    """The trainer, not trained, and the examples it kept. `what`: an example's noun ("pair",
    "row"); `shown(tokenizer, example)`: its decoded text for the traces."""
    from datasets import Dataset

    a = job.spec.algorithm
    steps_to_trace = trace_steps(a.traces, a.steps)
    traced: list[int] = []
    trained: list[str | None] = []

    def trace_step(step: int) -> None:
        if step in steps_to_trace:
            picked = [job.rows[i] for i in traced]
            trace_samples(job, trainer.model, picked, step, "train", trained)

    callback = ReportingCallback(job.reporter, "train", on_step=trace_step, proof=proof)
    trainer = trainer_class(
        model=job.model_path,
        args=config,
        train_dataset=Dataset.from_list(examples),
        processing_class=job.tokenizer,
        peft_config=lora_config(job.spec) if a.lora else None,
        callbacks=[callback, *held_out(job, "train"), *extra_callbacks],
    )
    job.device.hold_reference_frozen(trainer)  # a full fine-tune's copy: TRL loaded it in fp32
    silence_printer(trainer)
    kept, limit = trainer.train_dataset, config.max_length
    if len(kept) < len(examples):
        job.reporter.log(
            f"dropped {len(examples) - len(kept)} {what}s whose prompt fills max_length={limit}",
            level="warning",
        )
    if not len(kept):
        raise ConfigError(
            f"every {what}'s prompt is {limit} tokens or longer (max_prompt_length + "
            f"max_completion_length): raise algorithm.max_prompt_length"
        )
    first = [kept[i] for i in range(min(a.traces.samples, TRAINED_SHOWN, len(kept)))]
    traced[:] = [e[ROW] for e in first]
    trained[:] = [shown(job.tokenizer, e) for e in first]
    return trainer, kept
