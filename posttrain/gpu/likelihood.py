"""The likelihood a model gives known answers: held-out references (reference_nll, in evaluate
and the held-out curve) and preference pairs (preference_margins, DPO's evaluation).

Without materialising [batch, sequence, vocabulary] logits: the model's forward pass projects
only the positions that predict an answer token (transformers' `logits_to_keep`), for as many
rows at a time as keep that under LOGIT_POSITIONS, and those logits are upcast to fp32
UPCAST_POSITIONS at a time. The straightforward way (every position's logits, upcast whole)
held ~12 bytes a position a vocabulary row: 30 GB at 8 x 2,048 tokens and Qwen's 151,936
rows; this holds under 1 GB there (`python bench/eval_logits_memory.py` measures both).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from posttrain.gpu.pair_text import PairRenderer

LOGIT_POSITIONS = 2048  # positions whose logits one forward pass keeps, in the model's dtype
UPCAST_POSITIONS = 256  # positions upcast to fp32 (and log-softmaxed) at a time

Row = tuple[list[int], list[int]]  # (head, answer) token ids


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

    rows: list[Row | None] = []
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
    render = PairRenderer(tokenizer, template_kwargs or {})
    encoded = [render.encode(p) for p in pairs]
    rows: list[Row | None] = []
    for e in encoded:
        rows += [(e.prompt_ids, e.chosen_ids), (e.prompt_ids, e.rejected_ids)]
    sums = answer_nll_sums(model, tokenizer.pad_token_id, rows, batch)
    return [float(sums[2 * i + 1]) - float(sums[2 * i]) for i in range(len(encoded))]  # type: ignore[arg-type]


def answer_nll_sums(
    model: Any, pad_token_id: int, rows: list[Row | None], batch: int = 8
) -> list[float | None]:
    """The summed negative log-likelihood of each (head, answer) row's answer after its head,
    up to `batch` rows a forward pass, padded on the right; None where a row is None. The
    first token of a sequence has no position before it and is never scored."""
    out: list[float | None] = [None] * len(rows)
    was_training = model.training
    model.eval()
    try:
        for group in _groups(rows, batch):
            for i, total in zip(
                group, _group_nll_sums(model, pad_token_id, rows, group), strict=True
            ):
                out[i] = total
    finally:
        model.train(was_training)
    return out


def _groups(rows: list[Row | None], batch: int) -> Iterator[list[int]]:
    """Row indices in order, at most `batch` a group, each group's kept logits (rows x the
    span of positions that predict an answer token) within LOGIT_POSITIONS; a row alone
    may exceed it."""
    group: list[int] = []
    lo = hi = 0
    for i, row in enumerate(rows):
        if row is None:
            continue
        start, end = _predicting(row)
        wider = (min(lo, start), max(hi, end)) if group else (start, end)
        if group and (
            len(group) == batch or (len(group) + 1) * (wider[1] - wider[0]) > LOGIT_POSITIONS
        ):
            yield group
            group, wider = [], (start, end)
        group.append(i)
        lo, hi = wider
    if group:
        yield group


def _predicting(row: Row) -> tuple[int, int]:
    """The positions [start, end) whose logits predict the row's answer tokens (position p
    predicts token p + 1)."""
    head, answer = row
    return max(len(head) - 1, 0), len(head) + len(answer) - 1


def _group_nll_sums(
    model: Any, pad_token_id: int, rows: list[Row | None], group: list[int]
) -> list[float]:
    import torch

    picked = [rows[i] for i in group]
    seqs = [head + answer for head, answer in picked]  # type: ignore[misc]
    width = max(map(len, seqs))
    ids_BT = torch.tensor([s + [pad_token_id] * (width - len(s)) for s in seqs])
    mask_BT = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    spans = [_predicting(r) for r in picked]  # type: ignore[arg-type]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    keep_K = torch.arange(lo, hi)
    scored_BK = torch.stack(  # the position predicts one of this row's answer tokens
        [
            (keep_K >= max(len(h), 1) - 1) & (keep_K < e)
            for (h, _), (_, e) in zip(picked, spans, strict=True)
        ]  # type: ignore[misc]
    )
    targets_BK = ids_BT[:, lo + 1 : hi + 1]
    device = model.device
    with torch.inference_mode():
        logits_BKV = model(
            input_ids=ids_BT.to(device),
            attention_mask=mask_BT.to(device),
            logits_to_keep=keep_K.to(device),
        ).logits
        nll_BK = token_nll(logits_BKV, targets_BK.to(device))
    nll_BK = torch.where(scored_BK.to(device), nll_BK, torch.zeros_like(nll_BK))
    return [float(v) for v in nll_BK.sum(dim=-1)]


def token_nll(logits_BKV: Any, targets_BK: Any) -> Any:
    """-log p(target) at each position, in fp32, upcasting UPCAST_POSITIONS positions of the
    logits at a time (the same cross-entropy as on the whole tensor upcast at once)."""
    import torch

    vocab = logits_BKV.size(-1)
    flat_NV, targets_N = logits_BKV.reshape(-1, vocab), targets_BK.reshape(-1)
    nll_N = torch.empty(targets_N.shape, dtype=torch.float32, device=flat_NV.device)
    for start in range(0, len(targets_N), UPCAST_POSITIONS):
        end = start + UPCAST_POSITIONS
        nll_N[start:end] = torch.nn.functional.cross_entropy(
            flat_NV[start:end].float(), targets_N[start:end], reduction="none"
        )
    return nll_N.view(targets_BK.shape)
