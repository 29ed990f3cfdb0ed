"""check_dataset for preference (DPO) files: pairs rendered exactly as the trainer will see
them (posttrain.gpu.pair_text: the prompt once, both answers, through the model's real chat
template, with token counts), and the flags of posttrain.data.preference."""

from __future__ import annotations

from collections import Counter
from typing import Any

from posttrain.core.sampling import spread
from posttrain.data.dataset import Prepared
from posttrain.data.preference import pair_flags
from posttrain.gpu.pair_text import PairIds, PairRenderer, PairText
from posttrain.spec.schema import RunSpec

LENGTH_SAMPLE = 5000  # pairs whose tokens are counted (and checked for truncation)


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
    encoded: dict[str, PairIds] = {}
    unrenderable: dict[str, str] = {}
    for i in spread(len(rows), LENGTH_SAMPLE):
        row = rows[i]
        try:
            encoded[row["id"]] = render.encode(row)
        except Exception as exc:  # jinja and template errors come in many types
            unrenderable[row["id"]] = f"row {row['id']!r}: {type(exc).__name__}: {exc}"
    counted = [r for r in rows if r["id"] in encoded]
    lengths = [
        (len(encoded[r["id"]].chosen_ids), len(encoded[r["id"]].rejected_ids)) for r in counted
    ]
    cut = [r for r in counted if encoded[r["id"]].cut_off(limit)]
    problems = []
    if unrenderable:
        reasons = "; ".join(list(unrenderable.values())[:3])
        problems.append(
            f"{len(unrenderable)} pairs do not render through the chat template (the trainer "
            f"refuses them): {reasons}; fix those rows or drop them with dataset.filters"
        )
    empty = [r["id"] for r in rows if not str(r.get("prompt_text") or "").strip()]
    if empty:
        problems.append(f"{len(empty)} pairs have an empty prompt (ids {empty[:5]})")
    repeated = [i for i, n in Counter(r["id"] for r in rows).items() if n > 1]
    if repeated:
        problems.append(
            f"{len(repeated)} ids are not unique (e.g. {repeated[0]!r}): the holdout split "
            f"and decontamination key on ids"
        )
    over = [r for r in counted if len(encoded[r["id"]].prompt_ids) >= limit]
    if over:
        problems.append(
            f"{len(over)} of {len(counted)} pairs have a prompt of {limit} tokens or more "
            f"(max_prompt_length + max_completion_length): the trainer drops them; raise "
            f"algorithm.max_prompt_length"
        )
    problems += pair_flags(counted, lengths, cut, limit)
    picked = [r for r in data.train if r["id"] in encoded][:samples]
    pairs = [PairSample(id=r["id"], **dict(render.decode(encoded[r["id"]]))) for r in picked]
    tokens = {
        "prompt": [len(encoded[r["id"]].prompt_ids) for r in counted],
        "chosen": [c for c, _ in lengths],
        "rejected": [r for _, r in lengths],
    }
    return pairs, problems, tokens
