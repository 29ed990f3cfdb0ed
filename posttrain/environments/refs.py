"""What a spec's `environment:` names, checked without running any of the user's code.

    environment: {name: calculator}                         # built in
    environment: {name: envs/shop.py:ShopEnv}               # your class
    environment: {tools: envs/shop.py:[lookup, add_to_cart]}  # your plain functions

Files are confined to the allowed roots before anything looks at them, as reward files are.
"""

from __future__ import annotations

import re
from pathlib import Path

from posttrain.core.errors import ConfigError
from posttrain.core.paths import confine, expand, is_file

# name -> "module:Class" of the environments posttrain ships (their data beside them)
BUILTINS: dict[str, str] = {"calculator": "posttrain.environments.calculator:Calculator"}
_TOOL_LIST = re.compile(r"^\[\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*\]\Z")


def split_class_ref(ref: str) -> tuple[str, str]:
    """'envs/shop.py:ShopEnv' -> ('envs/shop.py', 'ShopEnv'); a built-in name -> its module."""
    ref = BUILTINS.get(ref, ref)
    target, sep, name = ref.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise ConfigError(
            f"environment.name '{ref}' is neither a built-in environment ({sorted(BUILTINS)}) "
            f"nor 'path/to/file.py:ClassName'"
        )
    return target, name


def split_tools_ref(ref: str) -> tuple[str, list[str]]:
    """'tools.py:[lookup, add]' -> ('tools.py', ['lookup', 'add'])."""
    target, sep, names = ref.partition(":")
    match = _TOOL_LIST.match(names.strip())
    if not sep or not target or match is None:
        raise ConfigError(
            f"environment.tools '{ref}' is not 'path/to/file.py:[function, ...]'; name the "
            f"file and its tool functions, e.g. 'tools.py:[lookup, add_to_cart]'"
        )
    functions = [n.strip() for n in match.group(1).split(",")]
    if len(set(functions)) != len(functions):
        raise ConfigError(f"environment.tools '{ref}' names a function twice")
    return target, functions


def is_file_target(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def check_target(target: str, field: str, roots: list[Path] | None) -> None:
    """A file target is confined (when roots are given) and must exist; a module is left to
    the child that imports it."""
    if not is_file_target(target):
        return
    if roots is not None:
        confine(target, f"{field} file", roots)
    if not target.endswith(".py"):
        raise ConfigError(f"{field} file '{target}' is not a .py file")
    if not is_file(target):
        raise ConfigError(
            f"{field} file '{target}' does not exist (looked for {expand(target).absolute()}); "
            f"give a path relative to the working directory or an absolute one"
        )
