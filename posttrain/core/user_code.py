"""A user's Python file (a reward, a gate, an environment) and the modules it imports from
its own folder, found without running any of it.

One rule wherever user code runs (the isolated child, a local trainer, a Modal container):
a user file imports from its own folder first, as `python file.py` would, then from the
working directory (the trainer is started with `python -m`, which puts it on sys.path).
`import_beside` applies the rule where the file is loaded; `local_modules` reads the file's
imports with `ast`, follows them through the modules those two folders hold, and names each
by its import path (`helpers.py`, `mylib/util.py`): the layout that, put beside the file,
imports the same on a machine that has only that folder. What reading cannot see: a module
named at run time (`importlib.import_module(name)`), a compiled extension, a data file that
a module opens. The standard library and posttrain are never taken from a user's folder:
every machine that trains has them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ALWAYS_INSTALLED = frozenset({*sys.stdlib_module_names, "posttrain", "__future__"})


def import_beside(file: Path) -> None:
    """Let a user file, about to be loaded, import the modules beside it (its folder goes
    first on sys.path, as for a script; once per process)."""
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def search_path(file: Path) -> list[Path]:
    """Where the imports of a user file are found, in order: its folder, the working
    directory."""
    folders = [file.resolve().parent, Path.cwd().resolve()]
    return list(dict.fromkeys(folders))


def local_modules(file: Path) -> dict[str, Path]:
    """The modules `file` imports from its search path, directly or through each other:
    import path (posix, relative: 'mylib/util.py') -> local file. A file Python cannot parse
    is read no further (loading it says why)."""
    roots = search_path(file)
    found: dict[str, Path] = {}
    todo: list[tuple[Path, str | None]] = [(file.resolve(), None)]
    read: set[Path] = set()
    while todo:
        path, package = todo.pop()
        if path in read:
            continue
        read.add(path)
        for name in _imported(path, package):
            for rel, local in _resolve(name, roots):
                if rel not in found:
                    found[rel] = local
                    todo.append((local, _package_of(rel)))
    return found


def working_directory_module(name: str) -> Path | None:
    """The file in the working directory that `import name` loads (the trainer has that
    directory on sys.path), or None: posttrain, the standard library, installed, or nowhere."""
    if name.split(".")[0] in ALWAYS_INSTALLED:
        return None
    files = _resolve(name, [Path.cwd().resolve()])
    return files[-1][1] if files else None


def _imported(path: Path, package: str | None) -> list[str]:
    """Every dotted name a file's import statements may load (a `from a import b` names
    both `a` and `a.b`, which is a module or an attribute); relative ones made absolute
    within `package` (None: the file is no package's module, so it has none)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [n for n in names if n.split(".")[0] not in ALWAYS_INSTALLED]


def _absolute(module: str | None, level: int, package: str | None) -> str | None:
    if level == 0:
        return module
    if not package:
        return None  # a relative import outside a package fails when it runs
    parts = package.split(".")
    if level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _package_of(rel: str) -> str:
    """The package a module at this import path belongs to ('' for a top-level module)."""
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1])


def _resolve(name: str, roots: list[Path]) -> list[tuple[str, Path]]:
    """The files that loading a dotted name runs, as Python's path finder picks them: the
    first root whose top is a package (__init__.py) or a module file, else the first whose
    top is a plain folder (a namespace package); each __init__.py on the way, and the
    module itself."""
    parts = name.split(".")
    top = parts[0]
    regular = [
        r for r in roots if (r / top / "__init__.py").is_file() or (r / f"{top}.py").is_file()
    ]
    namespace = [r for r in roots if (r / top).is_dir()]
    found = regular or namespace
    return _walk(found[0], parts) if found else []


def _walk(root: Path, parts: list[str]) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    here = root
    for depth, part in enumerate(parts):
        rel = "/".join(parts[: depth + 1])
        init, module = here / part / "__init__.py", here / f"{part}.py"
        if init.is_file():
            files.append((f"{rel}/__init__.py", init))
        elif module.is_file():
            files.append((f"{rel}.py", module))
            break  # what follows is an attribute of the module
        elif not (here / part).is_dir():
            break  # an attribute of the package, or nothing
        here = here / part
    return files
