"""The docs a newcomer walks: the README stays short and points at the index, the index lists
every page, every link lands on a file and a heading that exist, and every module path the
docs name is a file in this checkout (so a move or a rename shows up here, not in a reader's
404)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
README_MAX_LINES = 120  # what a newcomer reads before the index takes over

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A repository path in backticks: a module, a test or a bench script, by its file name.
MODULE_PATH = re.compile(r"`((?:posttrain|tests|bench)/[\w/]+\.py)`")
# A module of posttrain as the walkthrough names it, `package/module.py` or
# `package/module.name` (a function, a class, a constant, or `Class.method`).
PACKAGES = "|".join(p.name for p in (ROOT / "posttrain").iterdir() if p.is_dir())
MODULE_NAME = re.compile(rf"`((?:{PACKAGES})/\w+)(?:\.py|((?:\.\w+)+))?`")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def _defines(module: Path, name: str) -> bool:
    return bool(
        re.search(
            rf"^\s*(?:async def|def|class) {name}\b|^{name}\s*[:=]",
            module.read_text(encoding="utf-8"),
            flags=re.M,
        )
    )


def test_the_readme_fits_in_120_lines_and_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md is {len(lines)} lines"
    head = "\n".join(lines[:20])
    assert "make demo\nmake test" in head


def test_the_readme_links_the_index_and_the_walkthrough():
    links = _links(README)
    assert "docs/index.md" in links and "docs/architecture.md" in links


def test_the_readme_keeps_the_mcp_registrys_marker_as_a_comment():
    # The registry reads it from the README PyPI publishes; docs/server.md says why.
    text = README.read_text(encoding="utf-8")
    assert re.search(r"^<!-- mcp-name: io\.github\.\S+/posttrain -->$", text, flags=re.M)


def test_the_index_lists_every_doc_page():
    listed = {Path(t.split("#")[0]).name for t in _links(DOCS / "index.md")}
    missing = [p.name for p in PAGES if p.name != "index.md" and p.name not in listed]
    assert not missing, f"docs/index.md does not list {missing}"


def test_every_relative_link_lands_on_a_file_and_a_heading_that_exist():
    broken = []
    for page in [README, *PAGES]:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_module_path_the_docs_name_is_a_file_here():
    missing = []
    for page in [README, *PAGES]:
        for path in MODULE_PATH.findall(page.read_text(encoding="utf-8")):
            if not (ROOT / path).is_file():
                missing.append(f"{page.name}: {path}")
    assert not missing, "\n".join(missing)


def test_every_module_and_function_the_walkthrough_names_exists():
    missing = []
    for page in (DOCS / "architecture.md", DOCS / "development.md"):
        for module, names in MODULE_NAME.findall(page.read_text(encoding="utf-8")):
            file = ROOT / "posttrain" / f"{module}.py"
            if not file.is_file():
                missing.append(f"{page.name}: {module}")
            elif names and not _defines(file, names.split(".")[-1]):
                missing.append(f"{page.name}: {module}{names}")
    assert not missing, "\n".join(missing)
