"""What every command shares: the console, JSON output, and errors with stable exit codes."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from posttrain.core.errors import (
    BudgetError,
    ConfigError,
    NotFoundError,
    PosttrainError,
    RewardError,
)
from posttrain.core.secrets import redact

EXIT_USAGE, EXIT_NOT_FOUND, EXIT_NEEDS_APPROVAL, EXIT_BACKEND = 2, 3, 4, 5

# Without a terminal (an agent's shell pipes stdout) rich lays out for 80 columns and cuts
# tables there; a pipe has no width, so a table takes the width of its content, and text is
# not wrapped (an agent greps whole lines). Rules, which would span that width, stay 80 wide.
PIPE_WIDTH = 10_000
RULE_WIDTH = 80


class _Console(Console):
    def rule(self, title: Any = "", **kwargs: Any) -> None:
        from rich.rule import Rule

        width = None if self.is_terminal else min(self.width, RULE_WIDTH)
        self.print(Rule(title, **kwargs), width=width)


console = _Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
T = TypeVar("T")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for agents.")]


def fail(message: str, hint: str, code: int) -> None:
    """Print the error as JSON on stderr and exit with its stable code."""
    print(json.dumps({"error": redact(message), "hint": hint, "code": code}), file=sys.stderr)
    raise typer.Exit(code)


def guarded(fn: Callable[[], T]) -> T:
    """Run a command body, turning project errors into JSON errors with exit codes."""
    try:
        return fn()
    except NotFoundError as exc:
        fail(str(exc), "check the name or path", EXIT_NOT_FOUND)
    except (ConfigError, RewardError) as exc:
        fail(str(exc), "fix the input named in the error and run again", EXIT_USAGE)
    except BudgetError as exc:
        fail(
            str(exc),
            "a budget cap or the approval refused it; nothing was started",
            EXIT_NEEDS_APPROVAL,
        )
    except PosttrainError as exc:
        fail(str(exc), "see the error; the backend could not do it", EXIT_BACKEND)
    raise AssertionError("unreachable")


def emit(data: Any, as_json: bool, render: Callable[[Any], None], events: bool = False) -> None:
    """Print a verb's result: JSON for agents, else `render`; secret values masked first."""
    from posttrain.core.secrets import redact_value

    if as_json:
        emit_json(data, events)
    else:
        render(redact_value(data))


def emit_json(data: Any, events: bool = False) -> None:
    """A result as JSON: indented, or one line where it ends a stream of --events."""
    from posttrain.core.secrets import redact_value

    # ensure_ascii (the default): ESC, C0 and C1 controls leave as \u escapes, never raw
    data = redact_value(data)
    text = json.dumps(data, default=str) if events else json.dumps(data, indent=2, default=str)
    print(text, flush=True)


# ESC and the other C0 controls but tab and newline, DEL, the C1 controls (U+009B is a CSI
# on its own), and the bidirectional overrides that make text read other than it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# whole escape sequences go first, so no '[2J' or ']52;c;...' is left behind as litter:
# OSC (to BEL or ST), CSI (to its final byte), and two-byte escapes; the C1 forms too
_SEQUENCE = re.compile(
    "(?:\x1b\\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    "|(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"
    "|\x1b[@-Z\\\\^_]"
)


def untrusted(text: Any) -> str:
    """Run data (log messages, completions, causes, names) made safe to print: control
    characters removed, so a model's output cannot write the clipboard (OSC 52), make links
    (OSC 8) or clear the screen; and rich markup escaped, so `[link=...]` stays text."""
    from rich.markup import escape

    plain = _SEQUENCE.sub("", "" if text is None else str(text))
    return escape(_CONTROL.sub("", plain))


def ask_human(question: str | None, as_json: bool) -> Any:
    """The terminal's answer to an approval question: "approved", "declined", or None when
    nobody needs asking or nobody is at a terminal (the command then returns the
    confirmation token for the human to approve)."""
    if question is None or as_json or not sys.stdin.isatty():
        return None
    return "approved" if typer.confirm(question, default=False) else "declined"
