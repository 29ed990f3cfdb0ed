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

from posttrain.gpu.pair_text import PairRenderer, decode_pair
from posttrain.gpu.pretokenized import encoded_examples, pretokenized_trainer, reference_words
from posttrain.gpu.ranks import device_batch
from posttrain.gpu.trainers import (
    Job,
    common_config,
    schedule,
    sft_max_length,
)


def pair_examples(job: Job) -> list[dict[str, Any]]:
    """Each row's prompt, chosen and rejected token ids, and its index in the rows."""
    render = PairRenderer(job.tokenizer, job.spec.model.template_kwargs())
    return encoded_examples(job, render.encode)


def shown_pair(tokenizer: Any, example: dict[str, Any]) -> str:
    text = decode_pair(tokenizer, example)
    return f"{text.prompt}⟦chosen⟧{text.chosen}⟦rejected⟧{text.rejected}"


def dpo_trainer(job: Job, extra_callbacks: tuple[Any, ...] = (), proof: bool = True) -> Any:
    """TRL's DPOTrainer on the rows' own token ids, with posttrain's callbacks; not trained."""
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
        **schedule(a),
        max_length=limit,
        beta=a.dpo.beta,
        loss_type=[a.dpo.loss_type],
        **common_config(job, a.steps, save=True),
    )
    trainer, kept = pretokenized_trainer(
        job, PretokenizedDPOTrainer, config, examples, "pair", shown_pair, extra_callbacks, proof
    )
    lora = reference_words(a.lora is not None)
    job.reporter.log(
        f"train DPO ({a.dpo.loss_type}, beta {a.dpo.beta}, {lora}): {len(kept)} pairs, "
        f"max_length {limit}"
    )
    return trainer
