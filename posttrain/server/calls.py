"""One tool call's run: blocking work off the event loop, within a deadline, and every
failure turned into a clear ToolError, so a tool call never ends the server.

Past its deadline a call is abandoned: the client hears so, and its worker slot is free
again (the thread finishes on its own, inside the bounds of what it runs: the reward child's
time limit, the spec and response limits). `RedactResults` masks secret values in whatever
leaves the server.
"""

import logging
import os
import sqlite3
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData
from pydantic import BaseModel

from posttrain.core.errors import PosttrainError
from posttrain.core.secrets import redact, redact_value, secret_values

log = logging.getLogger("posttrain.server")
T = TypeVar("T")

DEFAULT_CALL_DEADLINE_S = 900.0  # a local evaluate of a small model, or an export, fits
LONG_CALL_DEADLINE_S = 4 * 3600.0  # evaluate on Modal, export of a large model


def call_deadline_s() -> float:
    """How long one tool call may run: $POSTTRAIN_CALL_DEADLINE_S, else 15 minutes."""
    try:
        return float(os.environ.get("POSTTRAIN_CALL_DEADLINE_S") or DEFAULT_CALL_DEADLINE_S)
    except ValueError:
        return DEFAULT_CALL_DEADLINE_S


async def call(fn: Callable[[], T], deadline_s: float | None = None) -> T:
    """Run blocking work off the event loop; turn every failure into a clear ToolError.

    Past its deadline a call is abandoned: the client hears so, and the worker slot is
    free again (the thread finishes on its own, inside the bounds of what it runs)."""
    deadline_s = deadline_s if deadline_s is not None else call_deadline_s()
    try:
        with anyio.move_on_after(deadline_s) as scope:
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        if scope.cancelled_caught:
            raise ToolError(
                f"the call did not finish within its deadline of {deadline_s:.0f} s and "
                f"was abandoned (POSTTRAIN_CALL_DEADLINE_S sets it); the server is still "
                f"running"
            )
        raise AssertionError("unreachable")
    except PosttrainError as exc:
        raise ToolError(redact(str(exc))) from None
    except ToolError:
        raise
    except sqlite3.OperationalError as exc:  # a full or read-only disk under the index
        raise ToolError(
            f"storage problem: {exc}; free disk space in POSTTRAIN_HOME or make "
            f"it writable (the server is still running)"
        ) from None
    except OSError as exc:  # a path the agent named: too long, a link loop, unreadable
        name = str(exc.filename or "")
        name = name if len(name) <= 120 else name[:120] + "..."
        raise ToolError(
            redact(f"cannot use the file '{name}': {exc.strerror or exc}; check the path")
        ) from None
    except anyio.get_cancelled_exc_class():  # the client gave up: not an error
        raise
    except BaseException as exc:  # exit() in a tool body must not end the server
        log.error("tool failed unexpectedly:\n%s", redact(traceback.format_exc()))
        raise ToolError(
            redact(
                f"internal error ({type(exc).__name__}: {exc}); the server is "
                f"still running, and the details are in its log"
            )
        ) from None


class RedactResults:
    """Server middleware: every result that leaves the server (tool results, the SDK's own
    argument-validation errors, which echo the input, resources) with each secret value
    masked, on the values before the runner serialises and escapes them."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            result = await call_next(ctx)
        except MCPError as exc:  # a JSON-RPC error whose message quotes the request
            values = secret_values()
            if not values:
                raise
            error = exc.error
            raise MCPError.from_error_data(
                ErrorData(
                    code=error.code,
                    message=redact(error.message, values),
                    data=redact_value(error.data, values),
                )
            ) from None
        values = secret_values()
        if not values or result is None or isinstance(result, ErrorData):
            return result
        if isinstance(result, BaseModel):  # as the runner would write it
            result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return redact_value(result, values)
