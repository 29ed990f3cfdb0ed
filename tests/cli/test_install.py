"""Installable the way MCP servers are: `posttrain mcp-config` writes a client's config (other
servers kept), its uvx entry and `make setup` take the torch build the machine fits (the CPU
build on Linux with no GPU), and server.json agrees with the package and the README's mcp-name
line. What the installs resolve to is in test_install_resolution.py."""

import json
import os
import re
import subprocess
import sys
import tomllib

import pytest
from typer.testing import CliRunner

from posttrain.cli import install
from posttrain.cli.app import app
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
    assert entry["args"] == [*install.uv_torch_args(), "--from", str(ROOT), "posttrain", "serve"]
    assert not (tmp_path / ".config").exists()  # printed, not written, without --write


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A Linux machine whose GPU signs the test sets: a driver file, nvidia-smi on PATH."""
    driver = tmp_path / "proc-driver-nvidia-version"
    monkeypatch.setattr(install, "NVIDIA_DRIVER_FILES", (driver,))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(sys, "platform", "linux")
    return {"driver": driver, "bin": bin_dir}


def printed_uvx_entry() -> tuple[list[str], str]:
    """The uvx entry's args mcp-config prints, and what it says on stderr."""
    done = CliRunner().invoke(app, ["mcp-config", "claude-desktop", "--uvx", "posttrain"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["mcpServers"]["posttrain"]["args"], done.stderr


def test_on_linux_with_no_gpu_the_uvx_entry_takes_torchs_cpu_build_and_says_so(machine):
    args, said = printed_uvx_entry()
    assert args == ["--torch-backend", "cpu", "--from", "posttrain", "posttrain", "serve"]
    assert "no CUDA device here" in said and "drop those two arguments" in said


@pytest.mark.parametrize("sign", ["driver file", "nvidia-smi"])
def test_with_a_gpu_the_uvx_entry_leaves_torch_to_pypis_cuda_build(machine, sign):
    if sign == "driver file":
        machine["driver"].write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65\n")
    else:
        smi = machine["bin"] / "nvidia-smi"
        smi.write_text("#!/bin/sh\n")
        smi.chmod(0o755)
    args, said = printed_uvx_entry()
    assert args == ["--from", "posttrain", "posttrain", "serve"]
    assert said == ""


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_on_macos_and_windows_pypis_torch_needs_no_other_index(machine, monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)  # PyPI's torch there pulls no nvidia package
    assert install.uv_torch_args() == []


def test_uv_parses_the_printed_uvx_options(tmp_path):
    """The pinned uv knows every option the entry passes it (offline: nothing is installed)."""
    uv = ROOT / ".venv/bin/uv"
    if not uv.is_file():
        pytest.skip("uv comes with make setup")
    args = [*install.CPU_TORCH_UV_ARGS, "--from", str(ROOT), "posttrain", "--help"]
    done = subprocess.run(
        [str(uv), "tool", "run", "--offline", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode != 2, done.stderr  # uv's usage error: an option it does not know


@pytest.mark.parametrize("wheels", ["present", "absent"])
def test_make_setup_installs_the_torch_build_the_machine_fits(tmp_path, wheels):
    """A folder of local wheels (this machine's CPU torch) wins; elsewhere install.py decides."""
    folder = tmp_path / "wheels"
    if wheels == "present":
        folder.mkdir()
    done = subprocess.run(
        ["make", "-n", "-B", "setup", f"WHEELS={folder}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    words = next(line for line in done.stdout.splitlines() if "torch==" in line).split()
    want = ["--find-links", str(folder)] if wheels == "present" else install.uv_torch_args()
    start = words.index("--python") + 2
    assert words[start : start + len(want)] == want
    assert words[start + len(want)].startswith("torch==")


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
