"""The tool-call reward: did the model call the right tool with the right arguments?

A call arrives in one of three shapes, all normalised to (name, arguments: dict) first:
  rollout shape   {"name": ..., "arguments": {...}}
  OpenAI wire     {"type": "function", "function": {"name": ..., "arguments": "<JSON string>"}}
  text            <tool_call>{"name": ..., "arguments": {...}}</tool_call> in the response
so both shapes of the same call score the same.

Per expected call: name (0 or 1) and arguments (matching keys / keys in either call, so extra
and missing arguments both cost); call score = name x (0.25 + 0.25 x arguments + 0.5 x exact),
where exact means every argument matches and none is extra or missing. A wrong call (an
invented argument, a wrong value or type) so never scores more than half: a policy cannot
settle on "nearly right" calls, yet a partly right one still scores above a wrong tool. Calls
are matched in order and averaged over max(expected, produced): an extra call costs as much as
a missing one. The probe battery (posttrain.rewards.tool_probes) checks these claims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from posttrain.data.toolcalls import TOOL_CALL_TAG, Call, call_parts, loads_json
from posttrain.rewards.base import Reward, Scores, column
from posttrain.rewards.text import strip_thinking


def normalise_call(call: Any) -> Call | None:
    """(name, arguments) from either dict shape or a JSON string of one; None if not a call."""
    return call_parts(call)


def normalise_calls(value: Any) -> list[Call]:
    """All calls in a label or completion: one call, a list, a message with tool_calls, or text."""
    if isinstance(value, str):
        tagged = TOOL_CALL_TAG.findall(strip_thinking(value, drop_tags=False))
        if tagged:
            return [c for c in map(normalise_call, tagged) if c is not None]
        value = loads_json(value.strip())
    if isinstance(value, Mapping):
        if "tool_calls" in value:
            return normalise_calls(value.get("tool_calls") or [])
        if value.get("content") and "name" not in value and "function" not in value:
            return normalise_calls(value["content"])
        call = normalise_call(value)
        return [call] if call else []
    if isinstance(value, Sequence) and not isinstance(value, str):
        calls: list[Call] = []
        for item in value:
            calls.extend(normalise_calls(item))
        return calls
    return []


def _same_value(a: Any, b: Any) -> bool:
    """Equal as JSON values: 1 == 1.0, key order ignored, strings compared after strip."""
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def argument_score(expected: dict[str, Any], produced: dict[str, Any]) -> float:
    keys = expected.keys() | produced.keys()
    if not keys:
        return 1.0
    matched = sum(
        k in expected and k in produced and _same_value(expected[k], produced[k]) for k in keys
    )
    return matched / len(keys)


NAME_CREDIT, ARGUMENTS_CREDIT, EXACT_CREDIT = 0.25, 0.25, 0.5  # sum 1: an exact call


def call_score(arguments_share: float) -> float:
    """One call with the right name: most of its score is for being exactly right."""
    exact = EXACT_CREDIT if arguments_share >= 1.0 else 0.0
    return NAME_CREDIT + ARGUMENTS_CREDIT * arguments_share + exact


def score_calls(expected: list[Call], produced: list[Call]) -> tuple[float, float, float]:
    """(reward, name share, argument share) for produced calls against the expected ones."""
    slots = max(len(expected), len(produced))
    if slots == 0:
        return 1.0, 1.0, 1.0  # no call expected and none made
    names = args = total = 0.0
    for (e_name, e_args), (p_name, p_args) in zip(expected, produced, strict=False):
        if e_name == p_name:
            a = argument_score(e_args, p_args)
            names, args, total = names + 1, args + a, total + call_score(a)
    return total / slots, names / slots, args / slots


@dataclass(frozen=True)
class ToolCallReward(Reward):
    """Right tool, right arguments, in any of the three call shapes, in [0, 1]."""

    name: ClassVar[str] = "tool_call"
    components: ClassVar[tuple[str, ...]] = ("parsed", "name", "arguments")
    headline: ClassVar[tuple[str, ...]] = ("parsed", "name", "arguments")
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    label_column: str = "tool_call"

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.label_column,)

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        labels = column(columns, self.label_column, len(completions), self.name)
        rows = []
        for completion, label in zip(completions, labels, strict=True):
            produced = normalise_calls(completion)
            reward, names, args = score_calls(normalise_calls(label), produced)
            rows.append((reward, 1.0 if produced else 0.0, names, args))
        return Scores(
            rewards=[r[0] for r in rows],
            components={
                "parsed": [r[1] for r in rows],
                "name": [r[2] for r in rows],
                "arguments": [r[3] for r in rows],
            },
        )
