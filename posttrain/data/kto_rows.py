"""A user's thumbs-up/down rows shaped as TRL's KTOTrainer reads them: the prompt as messages,
the answer as the assistant's turn, and the label read into True/False (None where it cannot be
read: `data check` names the row, and the trainer refuses it).

The prompt is read as DPO reads it (a conversation the row carries, else the template rendered
as the user's turn after the system prompt); the answer as SFT reads it: dataset.response_column,
else the reference column, else TRL's own `completion` column. The label column is given by the
caller (`label` by default) until the spec carries it.

Sits above posttrain.data.dataset (it shapes with its helpers); the dataset code reaches it
through the algorithm's registry entry, never by importing it.
"""

from __future__ import annotations

import json
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import (
    answer_turn,
    chat_prompt,
    prompt_messages,
    render_prompt,
    row_id,
)
from posttrain.data.kto_settings import KtoSpec
from posttrain.data.preference import answer_text
from posttrain.data.thumbs import Feedback, parse_label, thumbs_flags
from posttrain.data.toolcalls import canonical_tools

# A spec's `dataset:` section (posttrain.spec.schema.DatasetSpec). Not imported, even for the
# type checker: the spec is built over the algorithms, which shape rows here, so an import
# would close a circle (tests/test_import_cycles.py).
DatasetSpec = Any

DEFAULT_LABEL = "label"  # TRL's name for the column
TRL_ANSWER = "completion"  # TRL's name for the answer column
DEFAULT_REFERENCE = "reference"  # posttrain.spec.schema's default reference column


def answer_column(ds: DatasetSpec, columns: list[str]) -> str:
    """The column of the answer each label judges: response_column, else the reference column
    (the default one only where the rows have it), else TRL's `completion`."""
    if ds.response_column:
        return ds.response_column
    named = ds.reference_column and ds.reference_column != DEFAULT_REFERENCE
    if ds.reference_column and (named or DEFAULT_REFERENCE in columns):
        return ds.reference_column
    if TRL_ANSWER in columns:
        return TRL_ANSWER
    raise ConfigError(
        f"KTO needs the answer each label judges, and the rows have no '{DEFAULT_REFERENCE}' "
        f"or '{TRL_ANSWER}' column (they have: {columns}); set dataset.response_column"
    )


def kto_columns(ds: DatasetSpec, rows: list[dict[str, Any]], label_column: str) -> list[str]:
    """The columns KTO reads beyond the prompt's (the answer's, the label's), after checking
    the rows have them."""
    columns = sorted({k for r in rows[:100] for k in r})
    needed = [answer_column(ds, columns), label_column]
    for column in needed:
        if column not in columns:
            raise ConfigError(
                f"dataset column '{column}' is missing (the rows have: {columns}); KTO reads "
                f"the answer from dataset.response_column and the thumbs-up/down from the "
                f"label column: point the spec at columns the data has"
            )
    return needed


def kto_row(
    row: dict[str, Any], ds: DatasetSpec, label_column: str = DEFAULT_LABEL, answer: str = ""
) -> dict[str, Any]:
    """A feedback row as TRL's KTOTrainer reads it: `prompt` (messages), `completion` (the
    assistant's turn), `label` (True, False, or None when unreadable) and `label_value` (the
    row's own value); `reference` is the answer where it is desirable (evaluate's
    reference_nll must not reward an answer the raters turned down). `answer` is the answer
    column (answer_column's choice; computed from the row when not given)."""
    if ds.messages_column:
        raise ConfigError(
            "dataset.messages_column is for SFT chats; a KTO row has a prompt, one answer and "
            "a thumbs-up/down: set dataset.prompt_column, response_column and the label column"
        )
    answer = answer or answer_column(ds, sorted(row))
    conversation = chat_prompt(row, ds)
    text = render_prompt(row, ds) if conversation is None else ""
    prompt = conversation if conversation is not None else prompt_messages(text, ds)
    if conversation is not None:
        text = next((m["content"] for m in reversed(prompt) if m["role"] == "user"), "") or ""
    key = text if conversation is None else json.dumps(prompt, default=str)
    value = row.get(label_column)
    base = {k: v for k, v in row.items() if k not in ("prompt", "completion", "label")}
    base["id"] = row_id(row, key + json.dumps([row.get(answer), value], default=str))
    where = f"row {base['id']!r}"
    completion = answer_turn(row.get(answer), answer, where)
    label = parse_label(value)
    shaped = {
        **base,
        "prompt_text": text,
        "prompt": prompt,
        "completion": completion,
        "label": label,
        "label_value": value,
        "reference": answer_text(completion) if label else None,
    }
    if ds.tools_column:
        shaped["tools"] = canonical_tools(
            row.get(ds.tools_column), f"{where}: column '{ds.tools_column}'"
        )
    return shaped


def feedback(rows: list[dict[str, Any]]) -> list[Feedback]:
    """Shaped rows as the flags read them."""
    return [
        Feedback(
            str(r["id"]),
            answer_text(r["completion"]),
            r["label"],
            r.get("label_value"),
            str(r.get("prompt_text") or ""),
        )
        for r in rows
    ]


def kto_flags(
    rows: list[dict[str, Any]], label_column: str = DEFAULT_LABEL, kto: KtoSpec | None = None
) -> list[str]:
    """The flags of shaped KTO rows (posttrain.data.thumbs), with the spec's weights."""
    kto = kto or KtoSpec()
    return thumbs_flags(feedback(rows), label_column, kto.desirable_weight, kto.undesirable_weight)
