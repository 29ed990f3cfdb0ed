"""Probes for tool-call rewards: the wrong calls a policy could be paid for.

Rows whose label (the reference column) holds one or more tool calls, in either shape, are
probed with calls that are wrong in one way each: extra calls, an invented argument, wrong
types, the right tool with wrong values, a call in a code fence (no <tool_call> tags, so a
serving stack's tool parser never sees it), no call at all. A reward that pays any of them more
than half of its range is flagged: a policy would settle there. A call with prose around it
is reported, not flagged: Qwen's tool parser reads the call and keeps the prose as content.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.toolcalls import Call, call_text, canonical_tools
from posttrain.rewards.probe_types import Probe, Row
from posttrain.rewards.tool_call import ToolCallReward, normalise_calls

INVENTED = ("note", "added by the model")  # an argument no schema asks for
WRONG_TEXT = "Atlantis"  # a value of the right type that no row expects


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return len(value)
    return json.dumps(value)  # a list or an object, sent as a string


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return WRONG_TEXT if value != WRONG_TEXT else "Lemuria"
    return type(value)()  # an empty list or object


def _each_argument(calls: Sequence[Call], change: Any) -> list[Call]:
    return [(name, {k: change(v) for k, v in args.items()}) for name, args in calls]


def _extra_calls(row: Row, rng: random.Random) -> str:
    others = [t for t in row.tools if t not in {name for name, _ in row.calls}]
    extra: list[Call] = [(t, {}) for t in others] or [row.calls[0]]
    return call_text([*row.calls, *extra])


def _fenced(row: Row, rng: random.Random) -> str:
    body = "\n".join(
        json.dumps({"name": n, "arguments": a}, ensure_ascii=False) for n, a in row.calls
    )
    return f"```json\n{body}\n```"


TOOL_PROBES: tuple[Probe, ...] = (
    Probe(
        "empty",
        "scores with no answer at all",
        "score an empty response 0",
        lambda row, rng: "",
        kind="wrong_call",
    ),
    Probe(
        "no_call",
        "answers in prose instead of calling the tool",
        "score a missing call 0",
        lambda row, rng: "I cannot look that up right now, but it is probably fine.",
        kind="wrong_call",
    ),
    Probe(
        "extra_calls",
        "calls every tool it is offered, or the right one twice, to be sure to hit",
        "average over max(expected, produced) calls: an extra call costs like a missing one",
        _extra_calls,
        kind="wrong_call",
    ),
    Probe(
        "invented_argument",
        "adds an argument no schema asks for",
        "count extra arguments as mismatches and pay most of the score for an exact call",
        lambda row, rng: call_text([(n, {**a, INVENTED[0]: INVENTED[1]}) for n, a in row.calls]),
        kind="wrong_call",
    ),
    Probe(
        "wrong_types",
        "sends the right values as the wrong JSON types ('3' for 3, 7 for 'Paris')",
        "compare values with their types",
        lambda row, rng: call_text(_each_argument(row.calls, _wrong_type)),
        kind="wrong_call",
    ),
    Probe(
        "right_tool_wrong_values",
        "calls the right tool with the wrong values",
        "pay most of the score for the values, not the name",
        lambda row, rng: call_text(_each_argument(row.calls, _wrong_value)),
        kind="wrong_call",
    ),
    Probe(
        "code_fence",
        "writes the call as JSON in a code fence, which a tool parser never executes",
        "read calls from <tool_call> tags only",
        _fenced,
        kind="wrong_call",
    ),
    Probe(
        "prose_around_call",
        "wraps the right call in prose",
        "if the answer must be the call alone, pay nothing for text around it",
        lambda row, rng: f"Let me check that for you.\n{call_text(row.calls)}\nOne moment.",
        kind="info",
    ),
)


def _tool_names(value: Any) -> tuple[str, ...]:
    try:
        tools = canonical_tools(value, "tools") or []
    except ConfigError:
        return ()
    return tuple(t["function"]["name"] for t in tools)


def tool_rows(
    reward: Any,
    rows: Sequence[Mapping[str, Any]],
    prompt_column: str,
    reference_column: str,
) -> tuple[list[Row], int] | None:
    """The rows as tool rows (their expected calls and offered tools), and how many had no
    call to probe; None when this is not a tool-call check (the reward is not the tool_call
    reward and the labels are not calls)."""
    labels = [r.get(reference_column) for r in rows]
    calls = [normalise_calls(label) for label in labels]
    structured = all(isinstance(label, Mapping | list) for label in labels)
    if not isinstance(reward, ToolCallReward) and not (structured and all(calls)):
        return None
    kept = [
        Row(
            str(r.get(prompt_column, "")),
            call_text(c),
            r,
            calls=tuple(c),
            tools=_tool_names(r.get("tools")),
        )
        for r, c in zip(rows, calls, strict=True)
        if c
    ]
    return kept, len(rows) - len(kept)
