"""One canonical tool-call form, reached when rows load: both call shapes, tools as a list or a
JSON string, and a clear error naming the row and the field for what cannot be normalised."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import prepare
from posttrain.data.toolcalls import as_text, call_text, canonical_messages, canonical_tools
from posttrain.spec.schema import DatasetSpec

WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def chat(call):
    return [
        {"role": "user", "content": "Wetter in São Paulo?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": {"temperature": 21, "sky": "☀"}},
        {"role": "assistant", "content": "21 °C."},
    ]


def test_both_call_shapes_become_one_with_the_arguments_parsed_once():
    args = {"city": "São Paulo", "when": {"day": "today"}}
    rollout = {"name": "get_weather", "arguments": args}
    wire = {
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps(args)},
    }
    a, b = canonical_messages(chat(rollout), "m"), canonical_messages(chat(wire), "m")
    assert a == b
    assert a[1]["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": args}}
    ]
    assert a[1]["content"] == ""  # None is no text, never "None"
    assert a[2]["content"] == '{"temperature": 21, "sky": "☀"}'  # JSON, not Python's repr


def test_tools_as_a_list_or_a_json_string_or_bare_functions_become_one_list():
    wrapped = [{"type": "function", "function": WEATHER}]
    assert canonical_tools([WEATHER], "t") == wrapped
    assert canonical_tools(json.dumps(wrapped), "t") == wrapped
    assert canonical_tools(json.dumps(WEATHER), "t") == wrapped
    assert canonical_tools(None, "t") is None and canonical_tools("", "t") is None


@pytest.mark.parametrize(
    ("call", "field", "why"),
    [
        ({"name": "get_weather", "arguments": "{city: Paris"}, "tool_calls[0].arguments", "not a"),
        ({"name": "get_weather", "arguments": "[1, 2]"}, "tool_calls[0].arguments", "JSON object"),
        ({"function": {"arguments": {}}}, "tool_calls[0]", "no function name"),
        ("get_weather(Paris)", "tool_calls[0]", "must be an object"),
    ],
)
def test_a_call_that_cannot_be_normalised_names_the_row_and_the_field(tmp_path, call, field, why):
    rows = [
        {"id": "ok", "chat": chat({"name": "f", "arguments": {}})},
        {"id": "bad", "chat": chat(call)},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = DatasetSpec(path=str(path), messages_column="chat")
    with pytest.raises(ConfigError) as caught:
        prepare(ds, "targets")
    message = str(caught.value)
    assert "row 'bad'" in message and f"column 'chat'[1].{field}" in message and why in message


def test_tools_that_are_not_schemas_name_the_row_and_the_column(tmp_path):
    rows = [{"id": "t1", "chat": chat({"name": "f", "arguments": {}}), "tools": "not json"}]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    ds = DatasetSpec(path=str(path), messages_column="chat", tools_column="tools")
    with pytest.raises(ConfigError, match=r"row 't1': column 'tools': tools must be a list"):
        prepare(ds, "targets")


def test_calls_are_written_as_a_qwen_model_writes_them_and_values_as_json_text():
    assert call_text([("f", {"city": "東京"})]) == (
        '<tool_call>\n{"name": "f", "arguments": {"city": "東京"}}\n</tool_call>'
    )
    assert as_text({"city": "Köln"}) == '{"city": "Köln"}' and as_text("x") == "x"
