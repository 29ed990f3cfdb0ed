"""Tool-calling chats for SFT, as a user's export holds them: awkward on purpose.

A seeded generator of the rows the tool-calling path must carry untouched into the trainer:

- a `functions` column of JSON schemas, 2-3 tools per row and different tools per row (so
  schemas differ in their keys from row to row), some rows as a list, some as a JSON string;
- a `conversation` column whose assistant turns call tools, alternately in the rollout shape
  (`{"name", "arguments": {...}}`) and the OpenAI wire shape (`arguments` a JSON string);
- every fourth row multi-turn: the call, the tool's reply (some replies JSON objects), then
  the final answer;
- unicode everywhere (São Paulo, 東京, Kraków), nested and list arguments;
- an `expected` column: the expected call as a dict, or, after a tool reply, the final
  answer as text (a reference column of mixed JSON values).

`python -m posttrain.data.tool_gym FOLDER [N]` writes `tool_chats.jsonl` and `tool_sft.yaml` (the
spec as a user writes it) there; tests use `rows()` and `write()` directly.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

CITIES = ("São Paulo", "東京", "Kraków", "Zürich", "Reykjavík", "Montréal", "Köln", "Paris")
CURRENCIES = ("EUR", "JPY", "BRL", "CHF", "PLN", "USD")


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": _schema(
        "get_weather",
        "Current weather in a city",
        {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        ["city"],
    ),
    "book_flight": _schema(
        "book_flight",
        "Book a flight between two cities",
        {
            "origin": {"type": "string"},
            "destination": {"type": "string"},
            "date": {"type": "string", "description": "YYYY-MM-DD"},
            "passengers": {
                "type": "object",
                "properties": {"adults": {"type": "integer"}, "children": {"type": "integer"}},
            },
        },
        ["origin", "destination", "date"],
    ),
    "convert_currency": _schema(
        "convert_currency",
        "Convert an amount between currencies",
        {
            "amount": {"type": "number"},
            "from": {"type": "string"},
            "to": {"type": "array", "items": {"type": "string"}},
        },
        ["amount", "from", "to"],
    ),
    "local_time": _schema(
        "local_time", "The local time in a city", {"city": {"type": "string"}}, ["city"]
    ),
}


def _task(rng: random.Random, i: int) -> tuple[str, dict[str, Any], str, Any, str]:
    """(tool, arguments, question, tool reply, final answer) for row i."""
    city, other = rng.sample(CITIES, 2)
    tool = list(TOOLS)[i % len(TOOLS)]
    if tool == "get_weather":
        unit = rng.choice(["celsius", "fahrenheit"])
        t = rng.randint(-5, 35)
        return (
            tool,
            {"city": city, "unit": unit},
            f"Quel temps fait-il à {city} ? ({i}) Réponds en {unit}.",
            {"temperature": t, "unit": unit, "sky": "☀"},
            f"Il fait {t}° ({unit}) à {city}.",
        )
    if tool == "book_flight":
        day = f"2027-0{1 + i % 9}-{10 + i % 18}"
        party = {"adults": 1 + i % 3, "children": i % 2}
        return (
            tool,
            {"origin": city, "destination": other, "date": day, "passengers": party},
            f"Book me a flight from {city} to {other} on {day} for {party['adults']} adult(s) "
            f"and {party['children']} child(ren). ({i})",
            f"confirmed: {city} → {other}, {day}, ref PT{i:03d}",
            f"Booked: {city} → {other} on {day}, reference PT{i:03d}.",
        )
    if tool == "convert_currency":
        amount = round(rng.uniform(5, 500), 2)
        source, *targets = rng.sample(CURRENCIES, 3)
        return (
            tool,
            {"amount": amount, "from": source, "to": targets},
            f"Wie viel sind {amount} {source} in {' und '.join(targets)}? ({i})",
            {t: round(amount * rng.uniform(0.5, 2), 2) for t in targets},
            f"{amount} {source} sind etwa " + ", ".join(targets) + " (Kurs von heute).",
        )
    hour = rng.randint(0, 23)
    return (
        tool,
        {"city": city},
        f"{city}は今何時ですか？ ({i})",
        f"{hour:02d}:15",
        f"{city}は今{hour:02d}時15分です。",
    )


def _call(name: str, arguments: dict[str, Any], wire: bool) -> dict[str, Any]:
    if wire:  # the OpenAI wire shape: arguments as a JSON string
        arguments_text = json.dumps(arguments, ensure_ascii=False)
        return {"type": "function", "function": {"name": name, "arguments": arguments_text}}
    return {"name": name, "arguments": arguments}


def rows(n: int = 40, seed: int = 0) -> list[dict[str, Any]]:
    """n rows of tool-calling chats, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tool, arguments, question, reply, answer = _task(rng, i)
        offered = [tool, *rng.sample([t for t in TOOLS if t != tool], 1 + i % 2)]
        rng.shuffle(offered)
        schemas = [TOOLS[t] for t in offered]
        call = _call(tool, arguments, wire=i % 2 == 1)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Du bist ein hilfreicher Assistent. Use the tools."},
            {"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]
        multi_turn = i % 4 == 3
        if multi_turn:
            messages += [
                {"role": "tool", "name": tool, "content": reply},
                {"role": "assistant", "content": answer},
            ]
        out.append(
            {
                "id": f"tc{i:03d}",
                "functions": json.dumps(schemas, ensure_ascii=False) if i % 3 == 2 else schemas,
                "conversation": messages,
                "expected": answer if multi_turn else {"name": tool, "arguments": arguments},
            }
        )
    return out


SPEC = """\
# SFT of Qwen2.5-1.5B-Instruct on tool-calling chats, LoRA r16, as a user writes it.
model: Qwen/Qwen2.5-1.5B-Instruct
dataset:
  path: {path}
  messages_column: conversation
  tools_column: functions
  reference_column: expected
  holdout_share: 0.2
algorithm:
  kind: sft
  lora: {{r: 16}}
  steps: 200
  batch_size: 8
  learning_rate: 1.0e-4
  max_prompt_length: 1024
  max_completion_length: 256
compute: {{backend: modal, gpu: A100-40GB}}
"""


def write(folder: Path, n: int = 40, seed: int = 0) -> tuple[Path, Path]:
    """The data file and the spec in `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "tool_chats.jsonl"
    data.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows(n, seed)), encoding="utf-8"
    )
    spec = folder / "tool_sft.yaml"
    spec.write_text(SPEC.format(path=data.name), encoding="utf-8")
    return data, spec


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    paths = write(target, int(sys.argv[2]) if len(sys.argv) > 2 else 40)
    print("\n".join(map(str, paths)))
