"""check_dataset for preference (DPO) files: pairs rendered exactly as the trainer will see
them (posttrain.gpu.pair_text: the prompt once, both answers, through the model's real chat
template, with token counts), and the flags of posttrain.data.preference."""

from __future__ import annotations

from typing import Any

from posttrain.data.dataset import Prepared
from posttrain.data.preference import pair_flags
from posttrain.gpu.pair_text import PairRenderer, PairText
from posttrain.gpu.render_check import encode_sample, prompts_over
from posttrain.spec.schema import RunSpec


class PairSample(PairText):
    """One pair as the trainer reads it, decoded from the token ids it is given."""

    id: str


def shown(pair: PairSample) -> str:
    """A pair as a person reads it: the prompt once, then each answer, with token counts."""
    return (
        f"--- prompt ({pair.prompt_tokens} tokens) ---\n{pair.prompt}\n"
        f"--- chosen ({pair.chosen_tokens} tokens) ---\n{pair.chosen}\n"
        f"--- rejected ({pair.rejected_tokens} tokens) ---\n{pair.rejected}"
    )


def check_pairs(
    spec: RunSpec, data: Prepared, tokenizer: Any, samples: int
) -> tuple[list[PairSample], list[str], dict[str, list[int]]]:
    """The first `samples` renderable training pairs, the problems and flags of an even
    sample of the rows (all of them up to LENGTH_SAMPLE), and the sample's token counts."""
    a = spec.algorithm
    limit = a.max_prompt_length + a.max_completion_length
    render = PairRenderer(tokenizer, spec.model.template_kwargs())
    rows = data.train + data.holdout
    encoded, counted, problems = encode_sample(rows, render.encode, "pairs")
    lengths = [
        (len(encoded[r["id"]].chosen_ids), len(encoded[r["id"]].rejected_ids)) for r in counted
    ]
    cut = [r for r in counted if encoded[r["id"]].cut_off(limit)]
    problems += prompts_over(counted, encoded, limit, "pairs")[1]
    problems += pair_flags(counted, lengths, cut, limit)
    picked = [r for r in data.train if r["id"] in encoded][:samples]
    pairs = [PairSample(id=r["id"], **dict(render.decode(encoded[r["id"]]))) for r in picked]
    tokens = {
        "prompt": [len(encoded[r["id"]].prompt_ids) for r in counted],
        "chosen": [c for c, _ in lengths],
        "rejected": [r for _, r in lengths],
    }
    return pairs, problems, tokens
