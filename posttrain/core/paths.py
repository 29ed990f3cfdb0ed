"""Paths an agent may name: confined to allowed roots, so no tool reads outside them.

Roots: the working directory the server started in, $POSTTRAIN_HOME, and any folders in
$POSTTRAIN_ROOTS (separated by the OS path separator). A working directory of `/` (where
some clients start servers) is never a root: it would allow every path; `posttrain serve`
says so when it starts there, and refuses a `/` named in $POSTTRAIN_ROOTS without
--allow-root. Symbolic links are resolved first, so a link inside a root cannot point the
server outside it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from posttrain.core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import ValidationInfo

# A run id names a folder under $POSTTRAIN_HOME/runs: a short slug never names a path outside
# it. \Z: "$" would take a final newline.
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}\Z")
HF_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+\Z")  # org/name on the hub, not a path


def home() -> Path:
    """$POSTTRAIN_HOME, default ~/.posttrain: runs, the index, caches of run state."""
    return Path(os.environ.get("POSTTRAIN_HOME") or Path.home() / ".posttrain").expanduser()


def expand(path: str | Path) -> Path:
    """`~` and `~user` expanded; a `~name` with no such user is a clear error, not a crash."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # pathlib: "Could not determine home directory."
        raise ConfigError(
            f"path '{path}' starts with '~' but names no user on this machine; give a path "
            f"without '~', or '~/...' for your home folder"
        ) from None


def _short(path: str | Path, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else text[:limit] + "..."


def allowed_roots() -> list[Path]:
    """The working directory, $POSTTRAIN_HOME and $POSTTRAIN_ROOTS; a working directory of
    `/` is left out (it would allow every path)."""
    extra = [Path(p) for p in os.environ.get("POSTTRAIN_ROOTS", "").split(os.pathsep) if p]
    cwd = Path.cwd()
    roots = [home()] if started_in_filesystem_root() else [cwd, home()]
    return [r.expanduser().resolve() for r in [*roots, *extra]]


def started_in_filesystem_root() -> bool:
    cwd = Path.cwd()
    return cwd == Path(cwd.anchor)


def filesystem_root_allowed(roots: list[Path] | None = None) -> bool:
    """Whether a root is the whole filesystem (`/`): every path would be allowed."""
    return any(r == Path(r.anchor) for r in (roots if roots is not None else allowed_roots()))


def confine(path: str | Path, what: str, roots: list[Path] | None = None) -> Path:
    """The resolved path, or ConfigError when it lies outside every allowed root."""
    roots = roots if roots is not None else allowed_roots()
    if "\x00" in str(path):
        raise ConfigError(f"{what} contains a NUL byte; give a real file path")
    resolved = expand(path)
    try:
        resolved = (resolved if resolved.is_absolute() else Path.cwd() / resolved).resolve()
    except RuntimeError:  # Python 3.11: "Symlink loop from ..."
        raise ConfigError(f"{what} '{path}' is a symbolic link loop; give the real file") from None
    except OSError as exc:  # a name too long, a folder that cannot be read
        raise ConfigError(f"{what} '{_short(path)}' cannot be used: {exc.strerror}") from None
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise ConfigError(
            f"{what} '{path}' is outside the allowed folders ({', '.join(map(str, roots))}); "
            f"move it under one of them, or add its folder to POSTTRAIN_ROOTS where the server "
            f"starts"
        )
    return resolved


def confine_spec_source(source: Any, roots: list[Path] | None = None) -> Any:
    """A spec given as a file path must lie inside the roots (dicts pass through)."""
    if isinstance(source, str | Path) and not str(source).lstrip().startswith("{"):
        confine(source, "spec file", roots)
    return source


def confine_in_validation(info: ValidationInfo, path: str, what: str) -> None:
    """With allowed roots in the validation context, a path outside them is refused before
    anything looks at it: no existence oracle, no import of a file outside the roots."""
    roots = (info.context or {}).get("roots")
    if roots is not None:
        confine(path, what, roots)


def confine_local_in_validation(
    info: ValidationInfo, name: str, what: str, looks_like_path: bool
) -> None:
    """A name that may be a hub repo id or a local folder: anything that is not a plain
    `org/name` id (e.g. `a/../../etc`) is a path and is confined before it is looked at; a
    plain id that exists here is a local folder (perhaps a link) and is confined too."""
    hub_like = bool(HF_REPO_ID.match(name)) and ".." not in name.split("/")
    if looks_like_path or not hub_like or Path(name).exists():
        confine_in_validation(info, name, what)


def exists(path: str | Path) -> bool:
    """Whether something is at the path; False for a name too long or a symlink loop."""
    try:
        return expand(path).exists()
    except OSError:
        return False


def is_file(path: str | Path) -> bool:
    """Whether the path is a file; False for a name too long or a symlink loop."""
    try:
        return expand(path).is_file()
    except OSError:
        return False
