"""One canonical form for tool calls and tool schemas, reached once, when rows are loaded.

A tool call arrives in two shapes, and its arguments as a dict or as a JSON string:

    rollout shape   {"name": "get_weather", "arguments": {"city": "Paris"}}
    OpenAI wire     {"type": "function", "function": {"name": "get_weather",
                                                      "arguments": "{\"city\": \"Paris\"}"}}

Both become the wire shape with the arguments parsed once into a dict:

    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}

which every Qwen chat template renders as `{"name": ..., "arguments": {...}}` (a string
would be rendered double-encoded). Tools (a list, or a JSON string of one) become a list of
`{"type": "function", "function": {...}}` schemas, as an OpenAI-style client sends them.

`canonical_messages` and `canonical_tools` are strict: a value that cannot be normalised is
a ConfigError naming the row and the field. `call_parts` is the lenient reader rewards use
on model output: anything that is not a call is None, never an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from posttrain.core.errors import ConfigError

Call = tuple[str, dict[str, Any]]
# A Qwen model's call in text: JSON inside <tool_call> tags (a last one may lack its end tag)
TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
KNOWN_ROLES = ("system", "user", "assistant", "tool")


def loads_json(value: Any) -> Any:
    """A JSON string parsed; anything else as it is. Not JSON: the string itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _name_and_arguments(call: Mapping[str, Any]) -> tuple[Any, Any]:
    inner = call.get("function")
    if isinstance(inner, Mapping):  # the wire shape
        call = inner
    return call.get("name"), call.get("arguments", call.get("parameters", {}))


def call_parts(call: Any) -> Call | None:
    """(name, arguments) of a call in either shape, or of a JSON string of one; None when it
    is not a call (for model output, where a malformed call is a miss, not an error)."""
    call = loads_json(call)
    if not isinstance(call, Mapping):
        return None
    name, arguments = _name_and_arguments(call)
    if not isinstance(name, str) or not name:
        return None
    arguments = loads_json(arguments)
    if arguments is None or arguments == "":
        arguments = {}
    if not isinstance(arguments, Mapping):
        return None
    return name, dict(arguments)


def tagged_calls(text: str) -> list[tuple[str, Call | None]]:
    """Each <tool_call> block in a model's text: its body, and the call it holds (either
    shape) or None when the body is not a call (malformed JSON, no name, arguments that are
    not an object)."""
    return [(body, call_parts(body)) for body in TOOL_CALL_TAG.findall(text)]


def canonical_call(call: Any, where: str) -> dict[str, Any]:
    """One call in the canonical wire shape with dict arguments; `where` names the row and
    field in the error."""
    call = loads_json(call)
    if not isinstance(call, Mapping):
        raise ConfigError(
            f"{where}: a tool call must be an object ({{'name', 'arguments'}} or the OpenAI "
            f"{{'type': 'function', 'function': {{...}}}}), not {type(call).__name__}"
        )
    name, arguments = _name_and_arguments(call)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: the tool call has no function name (got {name!r})")
    parsed = loads_json(arguments)
    if parsed is None or parsed == "":
        parsed = {}
    if not isinstance(parsed, Mapping):
        shown = repr(arguments) if len(repr(arguments)) <= 80 else repr(arguments)[:80] + "..."
        raise ConfigError(
            f"{where}.arguments: {shown} is not a JSON object; write the arguments as an object "
            f"or as a JSON string of one"
        )
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": parsed}}
    if isinstance(call.get("id"), str):
        out["id"] = call["id"]
    return out


def canonical_calls(value: Any, where: str) -> list[dict[str, Any]]:
    """A message's tool_calls (a list, one call, or a JSON string of either) canonical."""
    value = loads_json(value)
    if value is None or value == []:
        return []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(
            f"{where}: tool_calls must be a list of calls, not {type(value).__name__}"
        )
    return [canonical_call(c, f"{where}[{i}]") for i, c in enumerate(value)]


def canonical_tools(value: Any, where: str) -> list[dict[str, Any]] | None:
    """Tool schemas (a list, or a JSON string of one) as a list of wire-shaped schemas; None
    for no tools. A bare function schema ({'name', 'parameters'}) is wrapped."""
    value = loads_json(value)
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(
            f"{where}: tools must be a list of JSON schemas (or a JSON string of one), not "
            f"{type(value).__name__}"
        )
    tools = []
    for i, tool in enumerate(value):
        tool = loads_json(tool)
        if not isinstance(tool, Mapping):
            raise ConfigError(f"{where}[{i}]: a tool schema must be an object")
        inner = tool.get("function", tool)
        if not isinstance(inner, Mapping) or not isinstance(inner.get("name"), str):
            raise ConfigError(
                f"{where}[{i}]: a tool schema needs a 'name' (as {{'type': 'function', "
                f"'function': {{'name', 'description', 'parameters'}}}})"
            )
        tools.append(dict(tool) if "function" in tool else {"type": "function", "function": tool})
    return tools


def _content(message: Mapping[str, Any], where: str) -> Any:
    """The content a template concatenates: None becomes "", a tool's JSON reply becomes its
    JSON text (a template would print a dict as Python repr). Lists of content parts are left
    to the template, which accepts or names them."""
    content = message.get("content")
    if content is None:
        return ""
    if message.get("role") == "tool" and not isinstance(content, str):
        return json.dumps(content, ensure_ascii=False)
    return content


def canonical_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    """A chat (a list of messages, or a JSON string of one) with every tool call canonical."""
    messages = loads_json(messages)
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise ConfigError(
            f"{where}: must be a list of {{'role', 'content'}} messages, not "
            f"{type(messages).__name__}"
        )
    out = []
    for i, message in enumerate(messages):
        at = f"{where}[{i}]"
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise ConfigError(f"{at}: a message needs a 'role' (one of {KNOWN_ROLES})")
        clean = {k: v for k, v in message.items() if k != "tool_calls"}
        clean["content"] = _content(message, at)
        calls = canonical_calls(message.get("tool_calls"), f"{at}.tool_calls")
        if calls and role != "assistant":
            raise ConfigError(f"{at}: only assistant messages make tool calls (role {role!r})")
        if calls:
            clean["tool_calls"] = calls
        out.append(clean)
    return out


def call_text(calls: Sequence[Call]) -> str:
    """Calls as a Qwen model writes them: one <tool_call> block each."""
    return "\n".join(
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "\n</tool_call>"
        for name, arguments in calls
    )


def as_text(value: Any) -> str | None:
    """Any JSON value as text for a trace or an index: strings as they are, everything else
    as JSON (never Python's repr)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
