"""The agent skills shipped with posttrain, and installing them into a project."""

from __future__ import annotations

import shutil
from pathlib import Path

from posttrain.core.errors import NotFoundError

TARGETS = (".claude/skills", ".agents/skills")


def skills_source() -> Path:
    """The skills/ folder of this checkout (installed editable, as `make setup` does)."""
    here = Path(__file__).resolve().parent.parent  # the package's root, above cli/
    for candidate in (here.parent / "skills", here / "skills"):
        if candidate.is_dir():
            return candidate
    raise NotFoundError(
        "the skills folder was not found next to the posttrain package; install posttrain "
        "from its source checkout (pip install -e .)"
    )


def install(project_dir: Path) -> list[Path]:
    """Copy every skill folder into each target of the project; returns the folders written."""
    source = skills_source()
    written = []
    for target in TARGETS:
        for skill in sorted(p for p in source.iterdir() if (p / "SKILL.md").is_file()):
            dest = project_dir / target / skill.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(skill, dest)
            written.append(dest)
    return written
