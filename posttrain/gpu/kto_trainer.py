"""KTO with peft LoRA through TRL's KTOTrainer, reporting to the run directory.

The rows are rendered once (posttrain.gpu.kto_text, the rendering `data check` shows) and the
trainer is given their token ids and labels; TRL's own preparation, which would tokenize them
again from a datasets table of nested messages, is skipped, and the two steps of it that shape
training are kept: the filter (a prompt that fills max_length leaves no answer to learn from)
and the KL completions (each row's prompt paired with the previous row's answer within a
GPU's batch, from which the loss estimates its reference point).

Those pairings are why TRL samples KTO's rows in order (train_sampling_strategy "sequential")
and why a GPU's batch needs 2 rows or more. In order, a file exported sorted by rating would
give batches of one side only: the rows are shuffled once, with the spec's seed, before the
trainer sees them. With LoRA the reference model is the base with the adapter disabled; a full
fine-tune loads a reference copy.
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.kto_settings import KtoSpec
from posttrain.data.thumbs import ACCEPTED
from posttrain.gpu.kto_text import KtoRenderer, decode_kto
from posttrain.gpu.pretokenized import encoded_examples, pretokenized_trainer, reference_words
from posttrain.gpu.ranks import device_batch
from posttrain.gpu.trainers import (
    Job,
    common_config,
    schedule,
    sft_max_length,
)

NAMED = 5  # rows an error names


def kto_settings(job: Job) -> KtoSpec:
    """The spec's `algorithm.kto` section, or TRL's defaults where the spec has none."""
    return job.spec.algorithm.kto or KtoSpec()


def kto_examples(job: Job) -> list[dict[str, Any]]:
    """Each row's prompt and answer token ids, its label and its index in the rows, in an order
    shuffled once with the spec's seed. Rows whose label cannot be read are refused."""
    unread = [r for r in job.rows if not isinstance(r.get("label"), bool)]
    if unread:
        named = "; ".join(f"row {r.get('id')!r}: {r.get('label_value')!r}" for r in unread[:NAMED])
        raise ConfigError(
            f"{len(unread)} of {len(job.rows)} rows have a label KTO cannot read ({named}); "
            f"write one of {ACCEPTED}, or drop them with dataset.filters (`posttrain data "
            f"check` lists them)"
        )
    render = KtoRenderer(job.tokenizer, job.spec.model.template_kwargs())
    examples = encoded_examples(job, render.encode_row)
    random.Random(job.spec.algorithm.seed).shuffle(examples)
    return examples


def shown_row(tokenizer: Any, example: dict[str, Any]) -> str:
    return decode_kto(tokenizer, example).shown


def kto_batch(job: Job, kto: KtoSpec) -> int:
    """This GPU's batch; the KL estimate pairs a row's prompt with another row's answer in
    the same batch, so it needs two rows or more."""
    batch = device_batch(job.spec.algorithm.batch_size)
    if kto.estimates_kl and batch < 2:
        raise ConfigError(
            f"algorithm.batch_size {job.spec.algorithm.batch_size} gives each GPU {batch} row a "
            f"step, and KTO's loss estimates its reference point from the other answers in a "
            f"GPU's batch: give each GPU 2 rows or more (batch_size >= 2 x GPUs), or set "
            f"algorithm.kto.loss_type: apo_zero_unpaired (no KL term)"
        )
    return batch


def kto_trainer(job: Job, extra_callbacks: tuple[Any, ...] = (), proof: bool = True) -> Any:
    """TRL's KTOTrainer on the rows' own token ids and labels, with posttrain's callbacks; not
    trained."""
    from trl import KTOConfig, KTOTrainer

    class PretokenizedKTOTrainer(KTOTrainer):
        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if args.max_length is not None:
                dataset = dataset.filter(lambda e: len(e["prompt_ids"]) < args.max_length)
            if self.calculate_KL:  # TRL's rotation: each prompt with the batch's previous answer

                def rotated(batch):
                    answers = batch["completion_ids"]
                    return {"KL_completion_ids": answers[-1:] + answers[:-1]}

                dataset = dataset.map(
                    rotated, batched=True, batch_size=args.per_device_train_batch_size
                )
            return dataset

    spec, a = job.spec, job.spec.algorithm
    kto = kto_settings(job)
    examples = kto_examples(job)
    limit = sft_max_length(spec)
    config = KTOConfig(
        per_device_train_batch_size=kto_batch(job, kto),
        learning_rate=a.learning_rate,
        **schedule(a),
        max_length=limit,
        beta=kto.beta,
        desirable_weight=kto.desirable_weight,
        undesirable_weight=kto.undesirable_weight,
        loss_type=kto.loss_type,
        **common_config(job, a.steps, save=True),
    )
    trainer, kept = pretokenized_trainer(
        job, PretokenizedKTOTrainer, config, examples, "row", shown_row, extra_callbacks, proof
    )
    up = sum(bool(v) for v in kept["label"])
    lora = reference_words(a.lora is not None)
    job.reporter.log(
        f"train KTO ({kto.loss_type}, beta {kto.beta}, weights {kto.desirable_weight:g} 👍 / "
        f"{kto.undesirable_weight:g} 👎, {lora}): {len(kept)} rows ({up} desirable, "
        f"{len(kept) - up} undesirable), max_length {limit}"
    )
    return trainer
