"""What `data check` asks of every pretokenized kind (DPO's pairs, KTO's rows): an even sample
of the rows rendered through the chat template as the trainer will (the rows it refuses
named), empty prompts, repeated ids and prompts that fill max_length."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from posttrain.core.sampling import spread

LENGTH_SAMPLE = 5000  # rows whose tokens are counted (and checked for truncation)


def encode_sample(
    rows: list[dict[str, Any]],
    encode: Callable[[dict[str, Any]], Any],
    what: str,
    skip: Callable[[dict[str, Any]], bool] = lambda row: False,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The sample's token ids by row id, the rows encoded, and the problems every kind shares.
    `what`: the rows' noun ("pairs", "rows"); `skip`: rows flagged elsewhere, not encoded."""
    encoded: dict[str, Any] = {}
    unrenderable: dict[str, str] = {}
    for i in spread(len(rows), LENGTH_SAMPLE):
        row = rows[i]
        if skip(row):
            continue
        try:
            encoded[row["id"]] = encode(row)
        except Exception as exc:  # jinja and template errors come in many types
            unrenderable[row["id"]] = f"row {row['id']!r}: {type(exc).__name__}: {exc}"
    counted = [r for r in rows if r["id"] in encoded]
    problems = []
    if unrenderable:
        reasons = "; ".join(list(unrenderable.values())[:3])
        problems.append(
            f"{len(unrenderable)} {what} do not render through the chat template (the trainer "
            f"refuses them): {reasons}; fix those rows or drop them with dataset.filters"
        )
    empty = [r["id"] for r in rows if not str(r.get("prompt_text") or "").strip()]
    if empty:
        problems.append(f"{len(empty)} {what} have an empty prompt (ids {empty[:5]})")
    repeated = [i for i, n in Counter(r["id"] for r in rows).items() if n > 1]
    if repeated:
        problems.append(
            f"{len(repeated)} ids are not unique (e.g. {repeated[0]!r}): the holdout split "
            f"and decontamination key on ids"
        )
    return encoded, counted, problems


def prompts_over(
    counted: list[dict[str, Any]], encoded: dict[str, Any], limit: int, what: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows whose prompt fills max_length (the trainer drops them), and the problem."""
    over = [r for r in counted if len(encoded[r["id"]].prompt_ids) >= limit]
    if not over:
        return over, []
    return over, [
        f"{len(over)} of {len(counted)} {what} have a prompt of {limit} tokens or more "
        f"(max_prompt_length + max_completion_length): the trainer drops them; raise "
        f"algorithm.max_prompt_length"
    ]
