"""One scripted episode, played as TRL plays a rollout, with posttrain's bounds.

TRL's loop (GRPOTrainer._tool_call_loop): reset(**row), then while the last assistant turn
holds tool calls and fewer than max_tool_calling_iterations turns have run, each call runs
(an unknown tool or an exception becomes `{"error": ...}`), its result is appended as a
`tool` message (str(result)), and the model answers again. A turn whose <tool_call> is not
valid JSON is decoded as plain text: no tool runs and the episode ends. posttrain adds the
bounds TRL lacks: seconds per call into user code and characters per tool result.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.data.toolcalls import tagged_calls
from posttrain.environments.loader import Loaded

SHOWN_CHARS = 600  # of each result kept in the report (the model sees max_result_chars)


class CallTimeout(BaseException):
    """Raised into user code at its time bound; a BaseException, so a tool's own
    `except Exception` cannot swallow it."""


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """SIGALRM after `seconds` (the child's main thread): a sleeping or looping tool is
    interrupted; a hang inside C code is left to the child's overall limit."""

    def fire(signum: int, frame: Any) -> None:
        raise CallTimeout()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Bounds:
    max_turns: int
    tool_timeout_s: float
    max_result_chars: int


@dataclass
class CallRecord:
    name: str
    arguments: dict[str, Any]
    ok: bool  # the tool returned (not an error, a timeout or an unknown name)
    result: str  # as the model sees it, cut to SHOWN_CHARS for the report
    result_chars: int  # before the cut to max_result_chars
    cut: bool  # longer than max_result_chars: the model saw the first max_result_chars
    seconds: float
    error: str | None = None


@dataclass
class Turn:
    assistant: str
    calls: list[CallRecord] = field(default_factory=list)
    note: str | None = None  # e.g. "malformed tool call: decoded as plain text"


@dataclass
class Episode:
    observation: str | None = None  # what reset() appended to the last user turn
    turns: list[Turn] = field(default_factory=list)
    env_reward: float | None = None
    problems: list[str] = field(default_factory=list)  # bugs in the environment itself
    stopped_at_turn_bound: bool = False

    @property
    def successful_calls(self) -> int:
        return sum(c.ok for t in self.turns for c in t.calls)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "successful_calls": self.successful_calls}


def shown(value: Any) -> Any:
    """A value for the report: long strings cut (a policy's 200 kB argument stays out)."""
    if isinstance(value, str):
        return (
            value
            if len(value) <= SHOWN_CHARS
            else value[:SHOWN_CHARS] + f" [... {len(value):,} chars]"
        )
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


def guarded(fn: Callable[[], Any], seconds: float) -> tuple[Any, str | None]:
    """fn() within the bound: (value, None) or (None, what went wrong)."""
    try:
        with time_bound(seconds):
            return fn(), None
    except CallTimeout:
        return None, f"did not return within {seconds:g} s (stopped)"
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _call(tools: dict[str, Callable[..., Any]], name: str, args: dict[str, Any], b: Bounds):
    start = time.monotonic()
    if name not in tools:
        value, error = None, f"Tool {name} not found."  # TRL's words
    else:
        # TRL shows the model str(result): made inside the bound (a __str__ is code too)
        value, error = guarded(lambda: str(tools[name](**args)), b.tool_timeout_s)
    seconds = round(time.monotonic() - start, 3)
    text = str({"error": error}) if error else value
    cut = len(text) > b.max_result_chars
    seen = text[: b.max_result_chars]
    record = CallRecord(
        name, shown(args), error is None, shown(seen), len(text), cut, seconds, error
    )
    return record, seen


def play(loaded: Loaded, row: dict[str, Any], script: list[str], b: Bounds) -> Episode:
    """The episode the scripted assistant turns make: the last turn repeats if the script is
    shorter than the episode (so `same call forever` meets the turn bound)."""
    episode = Episode()
    made, problem = guarded(loaded.new, b.tool_timeout_s)
    if problem:
        episode.problems.append(f"creating the environment failed: {problem}")
        return episode
    instance, tools = made
    if instance is not None:
        observation, problem = guarded(lambda: instance.reset(**row), b.tool_timeout_s)
        if problem:
            episode.problems.append(f"reset(**row) failed: {problem}")
            return episode
        if observation is not None and not isinstance(observation, str):
            episode.problems.append(
                f"reset() returned {type(observation).__name__}; TRL appends a str (or None) "
                f"to the last user turn"
            )
        episode.observation = observation if isinstance(observation, str) else None
    for i in range(b.max_turns + 1):
        text = script[min(i, len(script) - 1)]
        turn = Turn(shown(text))
        episode.turns.append(turn)
        blocks = tagged_calls(text)
        if any(call is None for _, call in blocks):
            turn.note = "malformed tool call: TRL decodes the turn as plain text; no tool runs"
            break
        if not blocks:
            break  # a final answer
        if i == b.max_turns:
            episode.stopped_at_turn_bound = True
            turn.note = f"turn bound: no tool runs after {b.max_turns} tool-calling turns"
            break
        for _, call in blocks:
            name, args = call  # type: ignore[misc]
            record, _seen = _call(tools, name, args, b)
            turn.calls.append(record)
    if instance is not None and callable(getattr(instance, "get_reward", None)):
        value, problem = guarded(instance.get_reward, b.tool_timeout_s)
        if problem:
            episode.problems.append(f"get_reward() failed: {problem}")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            episode.problems.append(f"get_reward() returned {type(value).__name__}, not a float")
        elif not math.isfinite(value):
            episode.problems.append(f"get_reward() returned {value}")
        else:
            episode.env_reward = float(value)
    return episode
