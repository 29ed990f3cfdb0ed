"""DPO with peft LoRA through TRL's DPOTrainer, reporting to the run directory.

The rows are rendered once (posttrain.gpu.pair_text, the rendering `data check` shows) and
the trainer is given their token ids; TRL's own preparation, which would tokenize them again
from a datasets table of nested messages, is skipped, and its filter (a prompt that fills
max_length leaves no answer to learn from) kept. With LoRA the reference model is the base
with the adapter disabled: no second model in memory, and the reference is exactly the
starting point. A full fine-tune loads the reference from the same weights.
"""

from __future__ import annotations

from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.gpu.callback import ReportingCallback
from posttrain.gpu.pair_text import PairRenderer, decode_pair
from posttrain.gpu.ranks import device_batch
from posttrain.gpu.reporter import ROW, trace_steps
from posttrain.gpu.trainers import (
    Job,
    common_config,
    held_out,
    lora_config,
    sft_max_length,
    silence_printer,
    trace_samples,
)

TRAINED_SHOWN = 3  # pairs whose decoded tokens each trace carries


def pair_examples(job: Job) -> list[dict[str, Any]]:
    """Each row's prompt, chosen and rejected token ids, and its index in the rows."""
    render = PairRenderer(job.tokenizer, job.spec.model.template_kwargs())
    examples = []
    for i, row in enumerate(job.rows):
        try:
            ids = render.encode(row)
        except Exception as exc:  # jinja and template errors come in many types
            raise ConfigError(
                f"row {row.get('id')!r} does not render through the chat template "
                f"({type(exc).__name__}: {exc}); `posttrain data check` lists such rows"
            ) from None
        examples.append({**ids.as_example(), ROW: i})
    return examples


def shown_pair(tokenizer: Any, example: dict[str, Any]) -> str:
    text = decode_pair(tokenizer, example)
    return f"{text.prompt}⟦chosen⟧{text.chosen}⟦rejected⟧{text.rejected}"


def dpo_trainer(job: Job, extra_callbacks: tuple[Any, ...] = (), proof: bool = True) -> Any:
    """TRL's DPOTrainer on the rows' own token ids, with posttrain's callbacks; not trained."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    class PretokenizedDPOTrainer(DPOTrainer):
        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if args.max_length is None:
                return dataset
            return dataset.filter(lambda e: len(e["prompt_ids"]) < args.max_length)

    spec, a = job.spec, job.spec.algorithm
    assert a.dpo is not None
    examples = pair_examples(job)
    limit = sft_max_length(spec)
    config = DPOConfig(
        per_device_train_batch_size=device_batch(a.batch_size),
        learning_rate=a.learning_rate,
        lr_scheduler_type=a.lr_scheduler,
        max_length=limit,
        beta=a.dpo.beta,
        loss_type=[a.dpo.loss_type],
        **common_config(job, a.steps, save=True),
    )
    steps_to_trace = trace_steps(a.traces, a.steps)
    traced: list[int] = []
    trained: list[str | None] = []

    def trace_step(step: int) -> None:
        if step in steps_to_trace:
            picked = [job.rows[i] for i in traced]
            trace_samples(job, trainer.model, picked, step, "train", trained)

    callback = ReportingCallback(job.reporter, "train", on_step=trace_step, proof=proof)
    trainer = PretokenizedDPOTrainer(
        model=job.model_path,
        args=config,
        train_dataset=Dataset.from_list(examples),
        processing_class=job.tokenizer,
        peft_config=lora_config(spec) if a.lora else None,
        callbacks=[callback, *held_out(job, "train"), *extra_callbacks],
    )
    job.device.hold_reference_frozen(trainer)  # a full fine-tune's copy: TRL loaded it in fp32
    silence_printer(trainer)
    kept = trainer.train_dataset
    if len(kept) < len(examples):
        job.reporter.log(
            f"dropped {len(examples) - len(kept)} pairs whose prompt fills max_length={limit}",
            level="warning",
        )
    if not len(kept):
        raise ConfigError(
            f"every pair's prompt is {limit} tokens or longer (max_prompt_length + "
            f"max_completion_length): raise algorithm.max_prompt_length"
        )
    # traces show the trainer's own examples of their rows, decoded: prompt, chosen, rejected
    first = [kept[i] for i in range(min(a.traces.samples, TRAINED_SHOWN, len(kept)))]
    traced[:] = [e[ROW] for e in first]
    trained[:] = [shown_pair(job.tokenizer, e) for e in first]
    lora = "LoRA, reference: the base with the adapter off" if a.lora else "full, reference: a copy"
    job.reporter.log(
        f"train DPO ({a.dpo.loss_type}, beta {a.dpo.beta}, {lora}): {len(kept)} pairs, "
        f"max_length {limit}"
    )
    return trainer


def run_dpo(
    job: Job,
    resume: str | None = None,
    extra_callbacks: tuple[Any, ...] = (),
    proof: bool = True,
) -> Any:
    """DPO on the rows' pairs; returns the trainer."""
    trainer = dpo_trainer(job, extra_callbacks, proof)
    trainer.train(resume_from_checkpoint=resume)
    return trainer
