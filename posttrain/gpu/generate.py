"""Sampling completions from a model for traces and evaluation, through the chat template."""

from __future__ import annotations

from typing import Any


def sample(
    model: Any,
    tokenizer: Any,
    prompts: list[list[dict[str, str]]],
    *,
    max_new_tokens: int,
    temperature: float,
    template_kwargs: dict[str, Any] | None = None,
    num_return_sequences: int = 1,
    seed: int | None = None,
    tools: list[Any] | None = None,
) -> list[str]:
    """Completions for chat prompts, `num_return_sequences` each, in prompt order. `tools`:
    each prompt's tool schemas (as it trained with them), or None."""
    import torch

    texts = [
        tokenizer.apply_chat_template(
            p,
            tokenize=False,
            add_generation_prompt=True,
            tools=row_tools or None,
            **(template_kwargs or {}),
        )
        for p, row_tools in zip(prompts, tools or [None] * len(prompts), strict=True)
    ]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    batch = {k: v.to(model.device) for k, v in batch.items()}
    if seed is not None:
        torch.manual_seed(seed)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                num_return_sequences=num_return_sequences,
                pad_token_id=tokenizer.pad_token_id,
            )
    finally:
        model.train(was_training)
    new_tokens = out[:, batch["input_ids"].shape[1] :]
    return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
