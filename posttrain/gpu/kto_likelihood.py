"""The likelihood a model gives held-out feedback answers: evaluate's KTO arms.

Each answer is scored as KTO trains on it (posttrain.gpu.kto_text: the prompt through the chat
template with the generation prompt, then the answer and the end of the turn), by its mean
log-likelihood a token, so long and short answers weigh alike in the paired comparison
(posttrain.evals.kto_metrics). The forward passes are likelihood.py's, which keep no
[batch, sequence, vocabulary] logits.
"""

from __future__ import annotations

from typing import Any

from posttrain.gpu.kto_text import KtoRenderer
from posttrain.gpu.likelihood import Row, answer_nll_sums


def answer_logliks(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    template_kwargs: dict[str, Any] | None = None,
    batch: int = 8,
) -> list[float]:
    """Each row's answer: its mean log-likelihood a token after its prompt, under the model
    (rows: `prompt` and `completion` as messages, a read `label`, `tools` where they have
    them). Higher: the model finds the answer likelier."""
    render = KtoRenderer(tokenizer, template_kwargs or {})
    encoded = [render.encode_row(r) for r in rows]
    pairs: list[Row | None] = [(e.prompt_ids, e.completion_ids) for e in encoded]
    sums = answer_nll_sums(model, tokenizer.pad_token_id, pairs, batch)
    return [
        -float(total) / max(1, len(e.completion_ids))  # type: ignore[arg-type]
        for e, total in zip(encoded, sums, strict=True)
    ]
