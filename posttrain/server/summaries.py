"""A tool result's text a summary, not a copy: the structured content carries the data (its
schema is the tool's output schema); the text says what matters in a few lines, so a client
that shows both (or counts both against its result cap) does not read everything twice."""

import json
from typing import Any

from pydantic import BaseModel

MAX_SUMMARY_CHARS = 1_500
MAX_VALUE_CHARS = 300
LEADS = ("summary", "message", "verdict", "status", "note")  # said first, when a result has them


def summarise(data: dict[str, Any]) -> str:
    """Its lead fields, then every other top-level field as a scalar, a count or its keys."""
    parts = [f"{k}: {_short(data[k])}" for k in LEADS if data.get(k) not in (None, "")]
    for key, value in data.items():
        if key in LEADS or value in (None, ""):
            continue
        parts.append(f"{key}: {_short(value)}")
        if sum(len(p) + 2 for p in parts) > MAX_SUMMARY_CHARS:
            parts.append("...")
            break
    return "; ".join(parts) + " (the whole result is the structured content)"


def _short(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        said = " | ".join(value)  # warnings, notes: the words themselves, when short
        if len(said) <= 4 * MAX_VALUE_CHARS:
            return f"[{said}]"
    if isinstance(value, list):
        return f"{len(value)} item(s)"
    if isinstance(value, dict) and any(value.get(k) for k in LEADS):
        return _short(next(value[k] for k in LEADS if value.get(k)))  # a cost's own summary
    if isinstance(value, dict):
        keys = list(value)
        more = f", +{len(keys) - 6}" if len(keys) > 6 else ""
        return "{" + ", ".join(map(str, keys[:6])) + more + "}"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "..."


class SummariseText:
    """Server middleware: a tool result whose text is the JSON of its structured content gets
    a summary of it as its text instead (images and other content are kept)."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if getattr(ctx, "method", None) != "tools/call" or result is None:
            return result
        if isinstance(result, BaseModel):
            result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if not isinstance(result, dict) or result.get("isError"):
            return result
        structured = result.get("structuredContent")
        content = result.get("content") or []
        if not isinstance(structured, dict) or not content:
            return result
        first = content[0]
        if first.get("type") != "text" or not _is_copy(first.get("text", ""), structured):
            return result
        summary = {"type": "text", "text": summarise(structured)}
        return {**result, "content": [summary, *content[1:]]}


def _is_copy(text: str, structured: dict[str, Any]) -> bool:
    try:
        return json.loads(text) == structured
    except ValueError:
        return False
