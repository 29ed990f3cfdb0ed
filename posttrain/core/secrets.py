"""Secrets never leave the process: values of secret-looking environment variables are
replaced before anything is written to a run directory, a log, a tool result or a page.

A variable is secret when its name says so (TOKEN, SECRET, PASSWORD, API_KEY, ACCESS_KEY,
PRIVATE_KEY, CREDENTIAL) and its value is long enough to be one (8+ characters).
"""

from __future__ import annotations

import json
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
    """The current secret values and the forms escaping gives them (JSON, repr, both twice),
    longest first (so a secret inside another goes second). Text is redacted as it is, but
    a secret may reach it already escaped: a JSON line, a repr in a traceback."""
    raw = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_LENGTH}
    values = set(raw)
    for value in raw:
        once = {escape(value) for escape in _ESCAPES}
        values |= once | {escape(form) for form in once for escape in _ESCAPES}
    return sorted(values, key=len, reverse=True)


_ESCAPES = (
    lambda v: json.dumps(v)[1:-1],
    lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
    lambda v: repr(v)[1:-1],
    lambda v: ascii(v)[1:-1],
)


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
        return {redact_value(k, values): redact_value(v, values) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, values) for v in value]
    return value


def mask_log_records() -> None:
    """Every log record this process makes, its message and traceback with secret values
    masked: libraries log what they were given (the MCP SDK logs a failed call's arguments),
    and a log is output too. Installed once, by the server."""
    import logging
    import traceback

    previous = logging.getLogRecordFactory()
    if getattr(previous, "masks_secrets", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        values = secret_values()
        if not values:
            return record
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + "".join(traceback.format_exception(record.exc_info[1]))
            record.exc_info, record.exc_text = None, None  # no raw rendering of it later
        record.msg, record.args = redact(text, values), None
        return record

    factory.masks_secrets = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
