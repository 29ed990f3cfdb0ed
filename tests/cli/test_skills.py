"""The skills name only commands and tools that exist, and install where agents look."""

import asyncio
import re
from pathlib import Path

import typer
from mcp import Client

from posttrain.cli.app import app
from posttrain.cli.skills import install, skills_source
from posttrain.server.app import build_server

COMMAND = re.compile(r"`(posttrain(?: [a-z][a-z-]*)+)")
TOOL = re.compile(r"`([a-z_]+)\(\)`")


def skill_texts() -> dict[str, str]:
    return {str(p): p.read_text() for p in skills_source().rglob("*.md")}


def cli_paths() -> set[str]:
    root = typer.main.get_command(app)
    paths = set()

    def walk(command, prefix: str) -> None:
        paths.add(prefix)
        if hasattr(command, "commands"):  # a group (typer ships its own click)
            for name, sub in command.commands.items():
                walk(sub, f"{prefix} {name}")

    walk(root, "posttrain")
    return paths


def test_every_command_a_skill_names_exists():
    known = cli_paths()
    named = {m for text in skill_texts().values() for m in COMMAND.findall(text)}
    assert named, "the skills should show commands"
    for command in named:
        # "posttrain run get ID" names the path "posttrain run get" plus arguments
        words = command.split()
        assert any(" ".join(words[:n]) in known and n > 1 for n in range(len(words), 1, -1)), (
            f"skill names a command that does not exist: {command}"
        )


def test_every_tool_a_skill_names_exists(home):
    async def tool_names():
        async with Client(build_server(), mode="legacy") as client:
            return {t.name for t in (await client.list_tools()).tools}

    tools = asyncio.run(tool_names())
    named = {m for text in skill_texts().values() for m in TOOL.findall(text)}
    assert {"plan", "launch", "get_run", "sample_traces", "evaluate"} <= named
    assert named <= tools, f"skills name tools the server lacks: {named - tools}"


def test_the_skill_covers_the_lifecycle_rules():
    text = (skills_source() / "agent-driven-training" / "SKILL.md").read_text()
    for rule in (
        "never authorises a relaunch",
        "never authorises a fix",
        "one thing at a time",
        "reward hacking until",
        "needs_confirmation",
        "run id",
    ):
        assert rule in text
    reward_design = (skills_source() / "agent-driven-training" / "reward-design.md").read_text()
    assert "Self-rhymes" in reward_design and "One-word lines" in reward_design


def test_skills_install_into_claude_and_agents_folders(tmp_path: Path):
    written = install(tmp_path)
    for target in (".claude/skills", ".agents/skills"):
        skill = tmp_path / target / "agent-driven-training"
        assert (skill / "SKILL.md").read_text().startswith("---\nname: agent-driven-training")
        assert (skill / "reward-design.md").is_file()
    assert len(written) == 2
