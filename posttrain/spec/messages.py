"""A spec's validation errors as one line per problem: the field path, what is wrong, and
how to fix it, with a suggestion for a misspelt field."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

# Names people reach for from other tools, and the field that means the same here.
ALIASES = {
    "lr": "learning_rate",
    "max_steps": "steps",
    "num_train_steps": "steps",
    "max_new_tokens": "max_completion_length",
    "per_device_train_batch_size": "batch_size",
    "timeout": "timeout_s",
    "gpus": "gpu",
    "dataset_path": "path",
}


def explain(exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem: the field path, what is wrong, and how to fix it."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parent_path, field = err["loc"][:-1], str(err["loc"][-1])
            allowed = fields_at(model, parent_path)
            close = (
                [ALIASES[field]]
                if ALIASES.get(field) in allowed
                else (difflib.get_close_matches(field, allowed, n=1, cutoff=0.6))
            )
            hint = f"did you mean '{close[0]}'? " if close else ""
            lines.append(f"spec field '{loc}': unknown field; {hint}allowed here: {allowed}")
        else:
            message = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            shown = "" if isinstance(got, dict) else f" (got {_short_repr(got)})"
            lines.append(f"spec field '{loc or 'spec'}': {message}{shown}")
    return "; ".join(lines)


def _short_repr(value: Any, limit: int = 120) -> str:
    """The value as the error shows it: a 20 MB string must not come back whole."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"a number of {len(str(abs(value))):,} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def fields_at(model: type[BaseModel], path: tuple) -> list[str]:
    """The allowed field names at a nested path of the spec model; none where the path leads
    into a plain value or a free mapping."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part)) if hasattr(current, "model_fields") else None
        if field is None:
            return []
        annotation = field.annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            inner = getattr(candidate, "__args__", ())
            for c in (candidate, *inner):
                if isinstance(c, type) and issubclass(c, BaseModel):
                    current = c
                    break
            else:
                continue
            break
        else:
            return []  # a plain value or a free mapping (reward.params): no fields of ours
    return sorted(getattr(current, "model_fields", {}))
