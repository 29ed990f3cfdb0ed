"""User rewards: `path/to/file.py:function` or `module:function`, with TRL's signature.

    def my_reward(completions, **columns) -> list[float]: ...

The function gets each completion as its text, wherever it runs: in training (where TRL
passes a chat answer as a list of one assistant message), in `reward check` and in evaluate's
metrics alike, so what the check passed is what training calls. An environment's episode
(every one, a tool called or not) stays its list of messages, as does an answer with tool
calls. It also gets the prompts,
every dataset column by name, and the reward's parameters as keyword arguments. Its named
parameters without defaults are the columns it needs.
Load errors name the file and the problem; the guards check what it returns.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from posttrain.core.errors import RewardError
from posttrain.core.paths import expand
from posttrain.core.user_code import import_beside
from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.text import completion_text

_TRL_ARGS = frozenset(
    {
        "completions",
        "prompts",
        "completion_ids",
        "trainer_state",
        "log_extra",
        "log_metric",
        "environments",
    }
)
SIGNATURE_HINT = "def reward(completions, **columns) -> list[float]"


def answer_of(completion: Any) -> Any:
    """A completion as a user's reward gets it: a chat answer (TRL's list of assistant
    messages) as its text; an episode (tool calls, tool results) as its messages."""
    if isinstance(completion, str) or not isinstance(completion, list):
        return completion
    plain = all(
        isinstance(m, dict)
        and m.get("role", "assistant") == "assistant"
        and not m.get("tool_calls")
        for m in completion
    )
    return completion_text(completion) if plain else completion


def is_file_ref(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def split_ref(ref: str) -> tuple[str, str]:
    """'a/b.py:fn' -> ('a/b.py', 'fn'); the function is after the last colon."""
    target, sep, func = ref.rpartition(":")
    if not sep or not target or not func.isidentifier():
        raise RewardError(
            f"reward '{ref}' is neither a built-in name nor 'path/to/file.py:function' or "
            f"'module:function'"
        )
    return target, func


def _load_file(path: Path, mtime_ns: int) -> Any:
    """Execute a reward file as a fresh module (cached per path and modification time)."""
    digest = hashlib.sha1(f"{path}:{mtime_ns}".encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"posttrain_user_reward_{digest}", path)
    if spec is None or spec.loader is None:
        raise RewardError(f"reward file {path}: Python cannot load it (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    import_beside(path)  # its own modules, as `python file.py` finds them (also on Modal)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise RewardError(
            f"reward file {path} line {exc.lineno}: SyntaxError: {exc.msg}; fix the file"
        ) from exc
    except Exception as exc:
        line = _user_line(exc, str(path))
        raise RewardError(
            f"reward file {path} raised {type(exc).__name__} while loading{line}: {exc}"
        ) from exc
    return module


_load_file_cached = functools.lru_cache(maxsize=64)(_load_file)


def _user_line(exc: BaseException, filename: str) -> str:
    """' (line N)' for the deepest frame of the exception inside the user's file."""
    tb, line = exc.__traceback__, ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = f" (line {tb.tb_lineno})"
        tb = tb.tb_next
    return line


def load_function(ref: str, base_dir: Path | None = None) -> Callable[..., Any]:
    """The reward function a ref names, with errors that say what to fix."""
    target, func_name = split_ref(ref)
    if is_file_ref(target):
        path = expand(target)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            raise RewardError(
                f"reward file {target} does not exist (looked for {path}); give a path relative "
                f"to the working directory or an absolute one"
            )
        module = _load_file_cached(path, path.stat().st_mtime_ns)
        where = f"reward file {path}"
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise RewardError(
                f"reward module '{target}' cannot be imported ({exc}); install it or give a "
                f"file path such as rewards/{target.split('.')[-1]}.py:{func_name}"
            ) from exc
        where = f"reward module '{target}'"
    fn = getattr(module, func_name, None)
    if fn is None:
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        )
        raise RewardError(
            f"{where} has no function '{func_name}'; it defines: {', '.join(defined) or 'none'}"
        )
    if not callable(fn):
        raise RewardError(f"{where}: '{func_name}' is a {type(fn).__name__}, not a function")
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    kinds = {p.kind for p in params.values()}
    if "completions" not in params and inspect.Parameter.VAR_KEYWORD not in kinds:
        raise RewardError(
            f"{where}: '{func_name}' must take a 'completions' argument (TRL's signature: "
            f"{SIGNATURE_HINT})"
        )
    return fn


@dataclass(frozen=True)
class UserReward(Reward):
    """A reward function from the user's file or module. Pickles by reference, not by code."""

    name: ClassVar[str] = "user"
    components: ClassVar[tuple[str, ...]] = ()

    ref: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    value_range: tuple[float, float] = (-math.inf, math.inf)  # type: ignore[misc]
    base_dir: str | None = None  # where relative file paths start; None: the working directory
    episodes: bool = False  # an environment's episodes: each completion stays its messages

    def __post_init__(self) -> None:
        split_ref(self.ref)  # fail early on a malformed ref

    @property
    def __name__(self) -> str:
        return self.ref.rpartition(":")[2]

    @property
    def function(self) -> Callable[..., Any]:
        return load_function(self.ref, Path(self.base_dir) if self.base_dir else None)

    @property
    def columns(self) -> tuple[str, ...]:
        """Named parameters without a default, other than TRL's own and the reward's params."""
        try:
            params = inspect.signature(self.function).parameters.values()
        except (TypeError, ValueError):
            return ()
        return tuple(
            p.name
            for p in params
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in _TRL_ARGS
            and p.name not in self.params
        )

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        fn = self.function
        answers = list(completions) if self.episodes else [answer_of(c) for c in completions]
        values = fn(completions=answers, **columns, **self.params)
        if values is None or isinstance(values, str | bytes) or not hasattr(values, "__len__"):
            raise RewardError(
                f"reward '{self.ref}' returned {type(values).__name__}, not a list of floats "
                f"({SIGNATURE_HINT})"
            )
        return Scores(rewards=list(values))
