"""An episode read back from its messages: the assistant turns, each turn's tool calls (either
call shape, through posttrain.data.toolcalls) with the result the model saw, and the final answer.
Pure: the trainer's traces, evaluate and the episode reward all read episodes through it.

A completion is what follows the prompt, as TRL keeps it: assistant messages (with
`tool_calls` when the turn called tools) and the `tool` messages answering them. A tool that
failed answers `{'error': ...}` (TRL's words for an exception, an unknown tool, a timeout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posttrain.data.toolcalls import call_parts, tagged_calls

RESULT_CHARS = 600  # of each tool result kept in a transcript
ERROR_PREFIXES = ("{'error':", '{"error":')


def _cut(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return text[:RESULT_CHARS] + f" [... {len(text):,} chars]"


def _calls(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]] | None]:
    calls = message.get("tool_calls")
    if calls:
        return [call_parts(c) for c in calls]
    return [call for _, call in tagged_calls(str(message.get("content") or ""))]


def transcript(completion: Any) -> dict[str, Any]:
    """{"turns": [{"assistant", "calls": [{"name", "arguments", "result", "ok"}]}], "final",
    "tool_calls", "tool_errors", "turn_count"} of one episode."""
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    turns: list[dict[str, Any]] = []
    for message in completion:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "assistant":
            calls = [
                {"name": c[0], "arguments": c[1], "result": None, "ok": None}
                if c
                else {"name": None, "arguments": None, "result": None, "ok": False}
                for c in _calls(message)
            ]
            turns.append({"assistant": str(message.get("content") or ""), "calls": calls})
        elif role == "tool" and turns:
            content = str(message.get("content") or "")
            pending = [c for c in turns[-1]["calls"] if c["result"] is None and c["name"]]
            target = pending[0] if pending else None
            if target is None:  # a result the turn's calls do not account for
                target = {"name": message.get("name"), "arguments": None}
                turns[-1]["calls"].append(target)
            target["result"] = _cut(content)
            target["ok"] = not content.lstrip().startswith(ERROR_PREFIXES)
    calls = [c for t in turns for c in t["calls"]]
    last = turns[-1] if turns else None
    return {
        "turns": turns,
        "final": last["assistant"] if last and not last["calls"] else None,
        "tool_calls": len(calls),
        "tool_errors": sum(c["ok"] is False for c in calls),
        "turn_count": len(turns),
    }


def episode_line(read: dict[str, Any], limit: int = 400) -> str:
    """A transcript on one line, for examples and listings:
    `calculate({"expression": "3*4"}) -> 12 | submit_answer({"answer": 12}) -> ok | final: ...`."""
    import json

    parts = []
    for turn in read.get("turns", []):
        for c in turn["calls"]:
            if not c.get("name"):
                parts.append("(malformed tool call)")
                continue
            result = " ".join(str(c.get("result") or "").split())[:60]
            args = json.dumps(c.get("arguments"), ensure_ascii=False)
            parts.append(f"{c['name']}({args}) -> {result}")
        if not turn["calls"]:
            parts.append("final: " + " ".join(turn["assistant"].split()))
    text = " | ".join(parts) or "(no turn)"
    return text if len(text) <= limit else text[: limit - 3] + "..."
