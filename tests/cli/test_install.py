"""Installable the way MCP servers are: `posttrain mcp-config` writes a client's config (other
servers kept), and server.json agrees with the package and the README's mcp-name line."""

import json
import os
import re
import subprocess
import sys
import tomllib

from tests.conftest import ROOT


def mcp_config(cwd, home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "mcp-config", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "HOME": str(home), "POSTTRAIN_HOME": str(home / ".posttrain")},
    )


def test_mcp_config_writes_the_projects_mcp_json_and_keeps_other_servers(tmp_path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    done = mcp_config(tmp_path, tmp_path, "claude-code", "--write", "--project", str(tmp_path))
    assert done.returncode == 0, done.stderr
    servers = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]
    assert servers["other"] == {"command": "x"}
    entry = servers["posttrain"]
    assert entry["type"] == "stdio" and entry["args"][-1] == "serve"
    assert entry["env"] == {"POSTTRAIN_ROOTS": str(tmp_path)}
    started = subprocess.run(  # the command it wrote starts this posttrain
        [entry["command"], *entry["args"][:-1], "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0 and "serve" in started.stdout


def test_mcp_config_for_claude_desktop_with_uvx_prints_the_uvx_entry(tmp_path):
    done = mcp_config(tmp_path, tmp_path, "claude-desktop", "--uvx", str(ROOT))
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["posttrain"]
    assert entry["command"] == "uvx"
    assert entry["args"] == ["--from", str(ROOT), "posttrain", "serve"]
    assert not (tmp_path / ".config").exists()  # printed, not written, without --write


def test_an_unknown_client_is_refused_with_the_known_ones(tmp_path):
    done = mcp_config(tmp_path, tmp_path, "vscode")
    assert done.returncode == 2 and "use claude-code or claude-desktop" in done.stderr


def test_server_json_agrees_with_the_package_and_the_readmes_mcp_name():
    server = json.loads((ROOT / "server.json").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert server["$schema"].endswith("/2025-12-11/server.schema.json")
    package = server["packages"][0]
    assert (package["registryType"], package["identifier"]) == ("pypi", project["name"])
    assert package["version"] == server["version"] == project["version"]
    assert package["transport"] == {"type": "stdio"}
    assert package["packageArguments"] == [{"type": "positional", "value": "serve"}]
    named = re.search(r"mcp-name: (\S+)", (ROOT / "README.md").read_text())
    assert named and named.group(1) == server["name"]
