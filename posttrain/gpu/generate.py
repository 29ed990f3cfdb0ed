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


def reference_nll(
    model: Any,
    tokenizer: Any,
    prompts: list[Any],
    references: list[str | None],
    *,
    template_kwargs: dict[str, Any] | None = None,
    tools: list[Any] | None = None,
    batch: int = 8,
) -> list[float | None]:
    """The mean per-token negative log-likelihood of each reference answer, as the model's
    reply to its prompt (the chat template's generation prompt, then the answer and the end
    of the turn); None where a task has no reference."""

    rows = []
    for prompt, reference, row_tools in zip(
        prompts, references, tools or [None] * len(prompts), strict=True
    ):
        if not reference:
            rows.append(None)
            continue
        text = tokenizer.apply_chat_template(
            prompt,
            tokenize=False,
            add_generation_prompt=True,
            tools=row_tools or None,
            **(template_kwargs or {}),
        )
        head = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = tokenizer(str(reference) + tokenizer.eos_token, add_special_tokens=False)
        rows.append((head, answer["input_ids"]))
    sums = answer_nll_sums(model, tokenizer.pad_token_id, rows, batch)
    return [
        None if r is None else total / max(1, len(r[1]))
        for r, total in zip(rows, sums, strict=True)
    ]


def answer_nll_sums(
    model: Any, pad_token_id: int, rows: list[tuple[list[int], list[int]] | None], batch: int = 8
) -> list[float | None]:
    """The summed negative log-likelihood of each (head, answer) token pair's answer after its
    head, in batches, padded on the right; None where a row is None."""
    import torch

    out: list[float | None] = [None] * len(rows)
    todo = [i for i, r in enumerate(rows) if r is not None]
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            seqs = [rows[i][0] + rows[i][1] for i in chunk]  # type: ignore[index]
            width = max(map(len, seqs))
            ids = torch.tensor([s + [pad_token_id] * (width - len(s)) for s in seqs])
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
            labels = torch.full_like(ids, -100)
            for j, i in enumerate(chunk):
                head, answer = rows[i]  # type: ignore[misc]
                labels[j, len(head) : len(head) + len(answer)] = ids[
                    j, len(head) : len(head) + len(answer)
                ]
            with torch.inference_mode():
                logits = model(
                    input_ids=ids.to(model.device), attention_mask=mask.to(model.device)
                ).logits.float()
            shifted, targets = logits[:, :-1], labels[:, 1:].to(model.device)
            nll = torch.nn.functional.cross_entropy(
                shifted.reshape(-1, shifted.size(-1)),
                targets.reshape(-1),
                ignore_index=-100,
                reduction="none",
            ).view(targets.shape)
            for j, i in enumerate(chunk):
                out[i] = float(nll[j].sum())
    finally:
        model.train(was_training)
    return out


def preference_margins(
    model: Any,
    tokenizer: Any,
    pairs: list[dict[str, Any]],
    template_kwargs: dict[str, Any] | None = None,
    batch: int = 8,
) -> list[float]:
    """Each preference pair's log-likelihood margin under the model: the chosen answer's summed
    log-likelihood minus the rejected one's, both after the prompt, rendered as DPO trains on
    them (posttrain.gpu.pair_text). Positive: the model prefers the chosen answer."""
    from posttrain.gpu.pair_text import PairRenderer

    render = PairRenderer(tokenizer, template_kwargs or {})
    encoded = [render.encode(p) for p in pairs]
    rows: list[tuple[list[int], list[int]] | None] = []
    for e in encoded:
        rows += [(e.prompt_ids, e.chosen_ids), (e.prompt_ids, e.rejected_ids)]
    sums = answer_nll_sums(model, tokenizer.pad_token_id, rows, batch)
    return [float(sums[2 * i + 1]) - float(sums[2 * i]) for i in range(len(encoded))]  # type: ignore[arg-type]
