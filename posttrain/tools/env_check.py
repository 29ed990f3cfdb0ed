"""check_environment: an environment's tools as the model sees them, and scripted episodes
that hunt for its bugs, free and on the CPU, before any run.

The environment is someone's code: it is loaded and played only in the isolated child
(posttrain.environments.child), never here. What comes back is data: the tools' JSON
schemas, each scenario's episode (what the environment returned, what the reward paid), and
this side renders one episode through the model's real chat template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.core.formatting import cut
from posttrain.data.dataset import prepare, read_rows
from posttrain.data.toolcalls import canonical_call, tagged_calls
from posttrain.environments.child import check_in_child
from posttrain.environments.scenarios import WHAT
from posttrain.environments.verdicts import total, verdicts
from posttrain.spec.schema import EnvironmentSpec, ModelSpec, RunSpec, load_spec

DEFAULT_MODEL = "Qwen3-0.6B"  # whose template renders a bare environment's tools
RENDERED_CHARS = 8000
RENDERED_TAIL = 1000  # of them, the end: the last turn and its closing token stay in view


class ToolOut(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(description="The JSON schema of its arguments.")


class CallOut(BaseModel):
    name: str
    arguments: dict[str, Any]
    ok: bool = Field(description="The tool returned (no error, timeout or unknown name).")
    result: str = Field(description="What the model sees (cut for this report).")
    result_chars: int
    cut: bool = Field(description="Longer than max_result_chars: the model saw the start.")
    seconds: float
    error: str | None = None


class TurnOut(BaseModel):
    assistant: str = Field(description="The scripted assistant turn, as a model writes it.")
    calls: list[CallOut] = Field(default_factory=list)
    note: str | None = None


class EpisodeOut(BaseModel):
    scenario: str
    what: str = Field(description="What a policy does in this scenario.")
    row: int = Field(description="The data row reset() received.")
    observation: str | None = Field(None, description="What reset() added to the user turn.")
    turns: list[TurnOut] = Field(default_factory=list)
    rewards: dict[str, float] = Field(description="Each reward source's score (components).")
    total: float | None = Field(description="Their sum, as TRL adds them (weight 1 each).")
    successful_calls: int = 0
    stopped_at_turn_bound: bool = False
    problems: list[str] = Field(default_factory=list)
    crashed: str | None = Field(None, description="The child died in this scenario: why.")


class EnvironmentCheck(BaseModel):
    environment: str
    bounds: dict[str, float] = Field(description="max_turns, tool_timeout_s, max_result_chars.")
    tools: list[ToolOut]
    tokenizer: str = Field(description="Which tokenizer and chat template rendered the tools.")
    rendered: str = Field(description="One episode through the model's real chat template.")
    episodes: list[EpisodeOut]
    flagged: list[str] = Field(description="Bugs to fix before training.")
    notes: list[str]
    passed: bool = Field(description="No flag: the environment is ready to train in.")


def check_environment(
    target: dict[str, Any] | str | RunSpec,
    *,
    data: str | None = None,
    model: str | None = None,
    rows: int = 8,
    demo_column: str | None = None,
    roots: list[Path] | None = None,
) -> EnvironmentCheck:
    """Play the scripted episodes in the isolated child and judge them; `target` is a spec
    (dict, JSON or a .yaml/.json file) with an `environment`, or an environment reference
    (a built-in name, path/to/file.py:ClassName, or path/to/file.py:[fn, ...])."""
    spec, env, table = _resolve(target, data, model, rows, demo_column, roots)
    job = {
        "described": env.name or env.tools,
        "name": env.name,
        "tools": env.tools,
        "rows": table,
        "demo_column": env.demo_column,
        "bounds": {
            "max_turns": env.max_turns,
            "tool_timeout_s": env.tool_timeout_s,
            "max_result_chars": env.max_result_chars,
        },
        "reward": spec.reward.name if spec and spec.reward else None,
        "reward_params": spec.reward.params if spec and spec.reward else {},
    }
    meta, episodes = check_in_child(job)
    flagged, notes = verdicts(episodes, meta, env.max_result_chars)
    order = list(WHAT)
    episodes.sort(key=lambda e: order.index(e["episode"]) if e["episode"] in order else 99)
    tools = [_tool(s) for s in meta.get("tools", [])]
    model_spec = spec.model if spec else ModelSpec(name=model or DEFAULT_MODEL)
    described, rendered = _render(model_spec, meta.get("tools", []), episodes, table)
    return EnvironmentCheck(
        environment=str(job["described"]),
        bounds=job["bounds"],
        tools=tools,
        tokenizer=described,
        rendered=rendered,
        episodes=[_episode(e) for e in episodes],
        flagged=flagged,
        notes=notes,
        passed=not flagged,
    )


def _resolve(
    target: Any,
    data: str | None,
    model: str | None,
    rows: int,
    demo_column: str | None,
    roots: list[Path] | None,
) -> tuple[RunSpec | None, EnvironmentSpec, list[dict[str, Any]]]:
    if is_spec_source(target):
        spec = load_spec(target, roots)
        if spec.environment is None:
            raise ConfigError("the spec has no environment; add environment: {name: ...}")
        env = spec.environment
        if demo_column and env.demo_column is None:
            env = env.model_copy(update={"demo_column": demo_column})
        if data is not None:
            return spec, env, _json_rows(read_rows(data, limit=rows))
        prepared = prepare(spec.dataset, "prompts")
        return spec, env, _json_rows(prepared.train[:rows])
    builtin = target == "calculator"
    field = "tools" if ":[" in str(target) else "name"
    fields = {field: target, "demo_column": demo_column or ("demo" if builtin else None)}
    wrapped = load_spec({"model": model or DEFAULT_MODEL, "environment": fields}, roots)
    env = wrapped.environment
    assert env is not None
    if data is not None:
        return None, env, _json_rows(read_rows(data, limit=rows))
    if builtin:
        from posttrain.environments.calculator import rows as calculator_rows

        return None, env, calculator_rows()[:rows]
    return None, env, []


def is_spec_source(target: Any) -> bool:
    """Whether `target` is a spec (a dict, JSON text, a .yaml/.json file) rather than an
    environment reference."""
    if isinstance(target, RunSpec | dict):
        return True
    text = str(target).strip()
    return text.startswith("{") or text.lower().endswith((".yaml", ".yml", ".json"))


def _json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the child gets them (JSON): what cannot cross becomes its text."""
    return json.loads(json.dumps(rows, default=str))


def _tool(schema: dict[str, Any]) -> ToolOut:
    fn = schema.get("function", schema)
    return ToolOut(
        name=fn.get("name", "?"),
        description=fn.get("description", ""),
        parameters=fn.get("parameters") or {},
    )


def _episode(e: dict[str, Any]) -> EpisodeOut:
    return EpisodeOut(
        scenario=e["episode"],
        what=WHAT.get(e["episode"], ""),
        row=e.get("row", 0),
        observation=e.get("observation"),
        turns=[TurnOut(**t) for t in e.get("turns", [])],
        rewards=e.get("rewards", {}),
        total=total(e),
        successful_calls=e.get("successful_calls", 0),
        stopped_at_turn_bound=e.get("stopped_at_turn_bound", False),
        problems=e.get("problems", []),
        crashed=e.get("crashed"),
    )


def _user_text(row: dict[str, Any]) -> str:
    prompt = row.get("prompt", "")
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict)]
        return str(users[-1]) if users else ""
    return str(prompt)


def _render(
    model: ModelSpec,
    schemas: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    table: list[dict[str, Any]],
) -> tuple[str, str]:
    """The best episode (the demonstration, else every tool once) as the trainer renders it:
    the tools in the system turn, each call and result, through the real template."""
    from posttrain.gpu.tokenizers import load_tokenizer

    loaded = load_tokenizer(model.name)
    played = [e for e in episodes if not e.get("crashed")]
    best = next((e for e in played if e["episode"] == "demo"), None) or next(
        (e for e in played if e["episode"] == "every_tool"), None
    )
    row = table[best["row"]] if best and table else {}
    user = _user_text(row) + (best.get("observation") or "" if best else "")
    messages: list[dict[str, Any]] = [{"role": "user", "content": user or "(the row's prompt)"}]
    for i, turn in enumerate((best or {}).get("turns", [])):
        calls = [c for _, c in tagged_calls(turn["assistant"]) if c]
        if not calls:
            messages.append({"role": "assistant", "content": turn["assistant"]})
            continue
        wire = [canonical_call({"name": n, "arguments": a}, f"turn {i}") for n, a in calls]
        messages.append({"role": "assistant", "content": "", "tool_calls": wire})
        messages += [
            {"role": "tool", "name": c["name"], "content": c["result"]} for c in turn["calls"]
        ]
    text = loaded.tokenizer.apply_chat_template(
        messages, tools=schemas or None, tokenize=False, **model.template_kwargs()
    )
    if len(text) > RENDERED_CHARS:
        text = cut(text, RENDERED_CHARS, tail=RENDERED_TAIL)
    return loaded.described, text
