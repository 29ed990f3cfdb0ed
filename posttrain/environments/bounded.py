"""An environment as the trainer and evaluate run it: the user's class behind a proxy that
holds posttrain's bounds, which TRL lacks.

TRL (GRPOTrainer with `environment_factory`) builds one instance per rollout, offers its
public methods as tools (their signatures and docstrings become the JSON schemas) and calls
them with the model's arguments, from whichever thread runs the training step. The proxy
class has the same tools, with the same names, signatures and docstrings, and each call:

- runs within `tool_timeout_s` (SIGALRM on the main thread; elsewhere in a helper thread
  that is abandoned at the bound), so a sleeping tool cannot stall a step;
- has its result cut to `max_result_chars`, as `str(result)` is what the model reads;
- turns a failure (an exception, a timeout, wrong arguments) into an exception TRL catches
  and shows the model as `{"error": ...}`, its message cut too;
- is logged on the instance (`_episode.calls`), so traces and evaluate see each call's outcome.

`reset(**row)` gets the dataset row itself (TRL passes the trainer's table, which holds the
row's index only). The proxy defines no `get_reward`: posttrain's EpisodeReward calls the
user's through `_episode_reward()`, within the bound and behind the reward guards (every
public method of the proxy but reset is a tool, so its own helpers are private).
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.environments.episode import Bounds, CallRecord, guarded, shown
from posttrain.environments.loader import RESERVED, Loaded

ROW = "row"  # the trainer table's column holding each example's index in the rows


class ToolFailed(Exception):  # TRL shows the model its message as {"error": ...}
    """A tool call that did not return: the message is what the model sees."""


def call_within(fn: Callable[[], Any], seconds: float) -> tuple[Any, str | None]:
    """fn() within `seconds`: (value, None) or (None, what went wrong). On the main thread a
    SIGALRM interrupts it; on any other thread it runs in a daemon helper that is abandoned
    (left to finish alone) at the bound."""
    if threading.current_thread() is threading.main_thread():
        return guarded(fn, seconds)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # reported to the caller, whatever it was
            box["error"] = f"{type(exc).__name__}: {exc}"

    helper = threading.Thread(target=run, name="posttrain-tool", daemon=True)
    helper.start()
    helper.join(seconds)
    if helper.is_alive():
        return None, f"did not return within {seconds:g} s (abandoned)"
    return box.get("value"), box.get("error")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


@dataclass
class EpisodeLog:
    """What happened in one episode, beside the messages TRL keeps."""

    observation: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def tool_errors(self) -> int:
        return sum(not c.ok for c in self.calls)


def _tool_names(cls: type) -> list[str]:
    """The public functions TRL offers as tools, as it lists them (on the class)."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in RESERVED and not name.startswith("_")
    ]


def _bounded_tool(name: str, target: Callable[..., Any], is_method: bool) -> Callable[..., Any]:
    """A proxy method with the tool's name, signature, type hints and docstring, whose call
    goes to the user's instance (or plain function) within the bounds."""

    def tool(self: BoundedEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    signature = inspect.signature(target)
    if not is_method:  # a plain function: the proxy's method has `self` before its arguments
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        signature = signature.replace(parameters=[self_param, *signature.parameters.values()])
    functools.update_wrapper(tool, target)
    tool.__signature__ = signature  # type: ignore[attr-defined]
    return tool


class BoundedEnvironment:
    """Base of the proxy classes `bounded_class` makes (one per environment)."""

    _loaded: Loaded
    _bounds: Bounds
    _rows: Sequence[dict[str, Any]] | None

    def __init__(self) -> None:
        made, problem = call_within(self._loaded.new, self._bounds.tool_timeout_s)
        if problem:
            described = self._loaded.described
            raise ConfigError(f"environment {described}: creating it failed: {problem}")
        self._inner, self._tools = made
        self._episode = EpisodeLog()

    def reset(self, **row: Any) -> str | None:
        """TRL's reset: the row (found by its index when the trainer's table passes one)."""
        if self._rows is not None and ROW in row:
            row = dict(self._rows[int(row[ROW])])
        self._episode = EpisodeLog()
        if self._inner is None or not callable(getattr(self._inner, "reset", None)):
            return None
        value, problem = call_within(lambda: self._inner.reset(**row), self._bounds.tool_timeout_s)
        if problem:
            raise ConfigError(
                f"environment {self._loaded.described}: reset(**row) failed on row "
                f"{row.get('id', '?')}: {problem}; run `posttrain env check` on the spec"
            )
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"environment {self._loaded.described}: reset() returned "
                f"{type(value).__name__}; return a str (appended to the user turn) or None"
            )
        limit = self._bounds.max_result_chars
        self._episode.observation = None if value is None else _cut(value, limit)
        return self._episode.observation

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        start = time.monotonic()
        fn = self._tools[name]
        value, error = call_within(lambda: str(fn(**arguments)), self._bounds.tool_timeout_s)
        text = value if error is None else str({"error": error})
        limit = self._bounds.max_result_chars
        record = CallRecord(
            name=name,
            arguments=shown(arguments),
            ok=error is None,
            result=shown(_cut(text, limit)),
            result_chars=len(text),
            cut=len(text) > limit,
            seconds=round(time.monotonic() - start, 3),
            error=None if error is None else shown(error),
        )
        self._episode.calls.append(record)
        if error is not None:
            raise ToolFailed(_cut(error, limit))
        return _cut(text, limit)

    def _has_reward(self) -> bool:
        return self._inner is not None and callable(getattr(self._inner, "get_reward", None))

    def _episode_reward(self) -> tuple[float | None, str | None]:
        """The user's get_reward() within the bound: (value, None) or (None, the problem)."""
        if not self._has_reward():
            return None, None
        value, problem = call_within(self._inner.get_reward, self._bounds.tool_timeout_s)
        if problem:
            return None, f"get_reward() failed: {problem}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None, f"get_reward() returned {type(value).__name__}, not a float"
        return float(value), None


def bounded_class(
    loaded: Loaded, bounds: Bounds, rows: Sequence[dict[str, Any]] | None = None
) -> type[BoundedEnvironment]:
    """The proxy class of an environment: TRL's `environment_factory` (it takes no
    arguments). `rows`: the rows a trainer's table indexes (reset gets `row=i`)."""
    if loaded.factory is not None:
        cls = loaded.factory
        names = _tool_names(cls)  # type: ignore[arg-type]
        tools = {n: _bounded_tool(n, getattr(cls, n), True) for n in names}
        label = getattr(cls, "__name__", "Environment")
    else:
        tools = {f.__name__: _bounded_tool(f.__name__, f, False) for f in loaded.functions}
        label = "Tools"
    if not tools:
        raise ConfigError(
            f"environment {loaded.described} offers no tools: give it public methods with type "
            f"hints and a docstring (methods starting with _ are private)"
        )
    attributes = {"_loaded": loaded, "_bounds": bounds, "_rows": rows, **tools}
    return type(label, (BoundedEnvironment,), attributes)


def tool_schemas(env: BoundedEnvironment) -> list[dict[str, Any]]:
    """The tools' JSON schemas as TRL renders them into the prompt (from the bound methods,
    as TRL takes them)."""
    from transformers.utils import get_json_schema

    return [get_json_schema(getattr(env, n)) for n in _tool_names(type(env))]
