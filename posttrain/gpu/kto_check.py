"""`data check` for KTO files: feedback rows rendered exactly as the trainer will see them
(posttrain.gpu.kto_text: the prompt, then the answer, through the model's real chat template,
with token counts and the rater's verdict), the problems that stop the trainer, and the flags
of posttrain.data.thumbs.

Written apart from the spec so that the check verb (or the KTO algorithm unit) calls it with
what it has resolved: the training and held-out rows, the tokenizer, the template settings.
"""

from __future__ import annotations

from typing import Any

from posttrain.data.kto_rows import kto_flags
from posttrain.data.kto_settings import KtoSpec
from posttrain.gpu.kto_text import VERDICT, KtoRenderer, KtoText
from posttrain.gpu.render_check import encode_sample, prompts_over


class FeedbackSample(KtoText):
    """One row as the trainer reads it, decoded from the token ids it is given."""

    id: str


def shown(row: FeedbackSample) -> str:
    """A row as a person reads it: the prompt, then the verdict and the answer, with counts."""
    return (
        f"--- prompt ({row.prompt_tokens} tokens) ---\n{row.prompt}\n"
        f"--- answer {VERDICT[row.label]} ({row.completion_tokens} tokens) ---\n{row.completion}"
    )


def check_feedback(
    train: list[dict[str, Any]],
    holdout: list[dict[str, Any]],
    tokenizer: Any,
    template_kwargs: dict[str, Any],
    max_length: int,
    samples: int,
    label_column: str = "label",
    kto: KtoSpec | None = None,
) -> tuple[list[FeedbackSample], list[str], dict[str, list[int]]]:
    """The first `samples` renderable training rows, the problems and flags of the rows (an
    even sample of them for the token counts, all of them up to LENGTH_SAMPLE), and the
    sample's token counts. `max_length` is max_prompt_length + max_completion_length."""
    render = KtoRenderer(tokenizer, template_kwargs)
    rows = train + holdout
    encoded, counted, problems = encode_sample(
        rows, render.encode_row, "rows", skip=lambda row: not isinstance(row.get("label"), bool)
    )  # a label that cannot be read is flagged below with its value (posttrain.data.thumbs)
    over, too_long = prompts_over(counted, encoded, max_length, "rows")
    problems += too_long
    dropped = {r["id"] for r in over}
    cut = [r for r in counted if r["id"] not in dropped and encoded[r["id"]].cut_off(max_length)]
    if cut:
        problems.append(
            f"{len(cut)} of {len(counted)} rows have their answer cut at {max_length} tokens "
            f"(e.g. row {cut[0]['id']!r}): KTO judges the cut answer as the rater judged the "
            f"whole; raise algorithm.max_completion_length"
        )
    problems += kto_flags(rows, label_column, kto)
    picked = [r for r in train if r["id"] in encoded][:samples]
    shown_rows = [
        FeedbackSample(id=r["id"], **dict(render.decode_row(encoded[r["id"]]))) for r in picked
    ]
    tokens = {
        "prompt": [len(encoded[r["id"]].prompt_ids) for r in counted],
        "completion": [len(encoded[r["id"]].completion_ids) for r in counted],
    }
    return shown_rows, problems, tokens
