"""Secrets never leave the process: values of secret-looking environment variables are
replaced before anything is written to a run directory, a log, a tool result or a page.

A variable is secret when its name says so (TOKEN, SECRET, PASSWORD, API_KEY, ACCESS_KEY,
PRIVATE_KEY, CREDENTIAL) and its value is long enough to be one (8+ characters).
"""

from __future__ import annotations

import os
import re
from typing import Any

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|"
    r"CREDENTIAL",
    re.IGNORECASE,
)
MIN_LENGTH = 8
MASK = "[redacted]"


def secret_values() -> list[str]:
    """The current secret values, longest first (so a secret inside another goes second)."""
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, values: list[str] | None = None) -> str:
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_value(value: Any, values: list[str] | None = None) -> Any:
    """Strings anywhere inside dicts and lists, redacted."""
    values = secret_values() if values is None else values
    if not values:
        return value
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return {k: redact_value(v, values) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, values) for v in value]
    return value
