"""Scripted episodes that hunt for bugs in an environment, the way reward probes hunt for
exploits: each plays what a policy will do sooner or later, and the report says what the
environment returned and what the reward paid.

Flagged: a tool that raises or hangs on a well-typed call, an environment whose reset,
constructor or get_reward fails, a tool the model cannot be shown (no type hints or
docstring), a reward that never varies across the episodes, and a reward that pays an
episode without a successful tool call more than half of what the episodes span.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.toolcalls import Call, call_text
from posttrain.environments.episode import Bounds, Episode, guarded, play
from posttrain.environments.loader import Loaded, schemas
from posttrain.rewards.tool_call import normalise_calls

HUGE_CHARS = 200_000  # an argument a policy may write: longer than any sane result bound
FINAL = "That is my final answer."
SAMPLE: dict[str, Any] = {"integer": 3, "number": 2.5, "string": "test", "boolean": True}
WRONG: dict[str, Any] = {"integer": "three", "number": "two", "string": 12345, "boolean": "yes"}


@dataclass(frozen=True)
class Calls:
    """The calls the scripts are made of: the row's demonstration, and one call per tool
    with well-typed, wrong-typed and huge arguments (from its JSON schema)."""

    demo: list[Call]
    typed: list[Call]
    wrong: list[Call]
    huge: list[Call]

    @property
    def first(self) -> Call | None:
        return (self.demo or self.typed or [None])[0]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str  # what a policy does in it
    well_typed: bool  # its calls match the schemas: an error in one is the tool's bug
    script: Callable[[Calls], list[str] | None]  # the assistant turns; None: not playable


def _value(prop: dict[str, Any], how: str) -> Any:
    kind = prop.get("type")
    if how == "typed" and prop.get("enum"):
        return prop["enum"][0]
    if how == "huge" and kind == "string":
        return "x" * HUGE_CHARS
    table = WRONG if how == "wrong" else SAMPLE
    default: Any = "not a list" if how == "wrong" else []
    if kind == "object":
        default = "not an object" if how == "wrong" else {}
    return table.get(kind, default) if kind in table else default


def _call(schema: dict[str, Any], how: str) -> Call:
    fn = schema.get("function", schema)
    properties = (fn.get("parameters") or {}).get("properties") or {}
    return fn["name"], {k: _value(p, how) for k, p in properties.items()}


def _turns(calls: list[Call]) -> list[str] | None:
    return [call_text([c]) for c in calls] + [FINAL] if calls else None


def _malformed(c: Calls) -> list[str] | None:
    first = c.first
    return (
        [f'<tool_call>\n{{"name": "{first[0]}", "arguments": {{\n</tool_call>'] if first else None
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("no_call", "answers at once in prose, calling no tool", False, lambda c: [FINAL]),
    Scenario(
        "demo",
        "plays the row's demonstration (demo_column): the episode a good policy has",
        True,
        lambda c: _turns(c.demo),
    ),
    Scenario(
        "every_tool",
        "calls each tool once with well-typed sample arguments",
        True,
        lambda c: _turns(c.typed),
    ),
    Scenario("malformed_json", "writes a <tool_call> whose JSON is cut off", False, _malformed),
    Scenario(
        "wrong_types",
        "sends every argument as the wrong JSON type",
        False,
        lambda c: _turns([call for call in c.wrong if call[1]]),
    ),
    Scenario(
        "unknown_tool",
        "calls a tool that does not exist",
        False,
        lambda c: _turns([("no_such_tool", {"query": "test"})]),
    ),
    Scenario(
        "same_call_forever",
        "repeats the same call every turn and never answers",
        False,
        lambda c: [call_text([c.first])] if c.first else None,
    ),
    Scenario(
        "huge_argument",
        f"sends a {HUGE_CHARS:,}-character string argument",
        False,
        lambda c: _turns([call for call in c.huge if "x" * 100 in json.dumps(call[1])]),
    ),
)


def _fit(script: list[str], max_turns: int) -> list[str]:
    """A tool-per-turn script with more calls than the turn bound allows, as several calls
    a turn (TRL runs every call in a turn), so no tool is left unchecked."""
    calls, final = script[:-1], script[-1:]
    if len(calls) <= max_turns:
        return script
    per_turn = -(-len(calls) // max_turns)  # ceiling
    grouped = ["\n".join(calls[i : i + per_turn]) for i in range(0, len(calls), per_turn)]
    return grouped + final


def _scripts(
    tool_schemas: list[dict[str, Any]], demo: list[Call], max_turns: int
) -> dict[str, list[str]]:
    calls = Calls(
        demo,
        *([_call(s, how) for s in tool_schemas] for how in ("typed", "wrong", "huge")),
    )
    scripts = {sc.name: sc.script(calls) for sc in SCENARIOS}
    # the demonstration plays as written: a demo longer than the bound is the user's to see
    fitted = {"every_tool", "wrong_types", "huge_argument"}
    return {
        name: _fit(script, max_turns) if name in fitted else script
        for name, script in scripts.items()
        if script
    }


def _demo(rows: list[dict[str, Any]], demo_column: str | None) -> tuple[int, list[Call]]:
    for i, row in enumerate(rows):
        if demo_column and row.get(demo_column) not in (None, "", []):
            return i, normalise_calls(row[demo_column])
    return 0, []


def run_scenarios(
    loaded: Loaded,
    rows: list[dict[str, Any]],
    bounds: Bounds,
    demo_column: str | None,
    only: list[str] | None,
    score: Callable[[Episode, dict[str, Any]], dict[str, float]] | None,
    report: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Every scenario (or those in `only`), each reported through `report` as it finishes
    (the parent keeps what a crashing child had done). The first row plays them all; the
    demonstration plays on the first row that has one."""
    made, problem = guarded(loaded.new, bounds.tool_timeout_s)
    if problem:
        raise ConfigError(f"creating the environment failed: {problem}")
    instance, tools = made
    tool_schemas, problems = schemas(tools)
    demo_row, demo = _demo(rows, demo_column)
    for name, script in _scripts(tool_schemas, demo, bounds.max_turns).items():
        if only is not None and name not in only:
            continue
        report({"started": name})
        row_index = demo_row if name == "demo" else 0
        row = rows[row_index] if rows else {}
        episode = play(loaded, dict(row), script, bounds)  # TRL: reset(**row)
        components = score(episode, row) if score else {}
        if episode.env_reward is not None:
            components = {"environment": episode.env_reward, **components}
        report({"episode": name, "row": row_index, **episode.to_dict(), "rewards": components})
    return {
        "tools": tool_schemas,
        "problems": problems,
        "has_get_reward": instance is not None and callable(getattr(instance, "get_reward", 0)),
        "demo_calls": len(demo),
    }


WHAT = {s.name: s.what for s in SCENARIOS}
WELL_TYPED = {s.name for s in SCENARIOS if s.well_typed}


def typed_call(schema: dict[str, Any]) -> Call:
    """A call of the tool with well-typed sample arguments (from its JSON schema)."""
    return _call(schema, "typed")
