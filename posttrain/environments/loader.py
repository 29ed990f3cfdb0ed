"""Loading an environment in the isolated child: its class or functions, and its tools as the
model sees them (transformers' `get_json_schema`, as TRL renders them). User code: never
imported by the server or the CLI, only by the child and the trainer.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.user_code import import_beside
from posttrain.environments.refs import (
    is_file_target,
    split_class_ref,
    split_tools_ref,
)

RESERVED = ("reset", "get_reward")  # TRL's own methods: never offered as tools


@dataclass
class Loaded:
    """One environment ready to play: a factory of instances (None for plain functions),
    and what the model is offered."""

    described: str
    factory: Callable[[], Any] | None
    functions: list[Callable[..., Any]]  # plain tools (no environment)

    def new(self) -> tuple[Any, dict[str, Callable[..., Any]]]:
        """A fresh instance (or None) and its tools by name, as TRL collects them: the
        public functions defined on the class, bound to the instance."""
        if self.factory is None:
            return None, {f.__name__: f for f in self.functions}
        instance = self.factory()
        tools = {
            name: getattr(instance, name)
            for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in RESERVED and not name.startswith("_")
        }
        return instance, tools


def _module(target: str, field: str) -> Any:
    if not is_file_target(target):
        try:
            return importlib.import_module(target)
        except ImportError as exc:
            raise ConfigError(f"{field}: module '{target}' cannot be imported ({exc})") from exc
    path = Path(target).expanduser().resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"posttrain_user_env_{digest}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{field} file {path}: Python cannot load it (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    import_beside(path)  # its own modules, as `python file.py` finds them (also on Modal)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ConfigError(
            f"{field} file {path} line {exc.lineno}: SyntaxError: {exc.msg}"
        ) from None
    except Exception as exc:
        raise ConfigError(
            f"{field} file {path} raised {type(exc).__name__} while loading: {exc}"
        ) from exc
    return module


def _defined(module: Any, kind: Callable[[Any], bool]) -> str:
    names = sorted(n for n, v in vars(module).items() if kind(v) and not n.startswith("_"))
    return ", ".join(names) or "none"


def load(name: str | None, tools: str | None) -> Loaded:
    """The environment a spec names (`name`), or its plain tool functions (`tools`)."""
    if name is not None:
        target, cls_name = split_class_ref(name)
        module = _module(target, "environment.name")
        cls = getattr(module, cls_name, None)
        if not inspect.isclass(cls):
            raise ConfigError(
                f"environment.name '{name}': no class '{cls_name}' in {target}; it defines "
                f"classes: {_defined(module, inspect.isclass)}"
            )
        if not callable(getattr(cls, "reset", None)):
            raise ConfigError(
                f"environment '{cls_name}' has no reset() method; TRL calls reset(**row) at the "
                f"start of every episode: add `def reset(self, **row) -> str | None`"
            )
        return Loaded(f"{target}:{cls_name}", cls, [])
    if tools is None:
        raise ConfigError("give environment.name or environment.tools")
    target, names = split_tools_ref(tools)
    module = _module(target, "environment.tools")
    functions = []
    for fn_name in names:
        fn = getattr(module, fn_name, None)
        if not inspect.isfunction(fn):
            raise ConfigError(
                f"environment.tools: no function '{fn_name}' in {target}; it defines: "
                f"{_defined(module, inspect.isfunction)}"
            )
        functions.append(fn)
    return Loaded(tools, None, functions)


def schemas(tools: dict[str, Callable[..., Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each tool's JSON schema as the chat template gets it, and the problems found: a tool
    without type hints or a docstring cannot be offered (TRL would fail at start)."""
    from transformers.utils import get_json_schema

    out, problems = [], []
    for name, fn in tools.items():
        try:
            out.append(get_json_schema(fn))
        except Exception as exc:  # DocstringParsingException, TypeHintParsingException
            problems.append(
                f"tool '{name}' cannot be described to the model ({type(exc).__name__}: {exc}); "
                f"give every argument a type hint and a Google-style docstring with an Args: "
                f"section"
            )
    return out, problems
