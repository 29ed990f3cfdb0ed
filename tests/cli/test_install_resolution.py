"""What an install really resolves to, asked of the package indexes with the pinned uv (`uv pip
compile`: metadata only, nothing downloaded but a few MB of it): on Linux with no GPU the
options mcp-config prints take torch's CPU build and no nvidia package, no other dependency
pulls one, and PyPI's own Linux torch does (so the check can tell). A test skips, saying which,
only where its index cannot be reached."""

import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from posttrain.cli import install
from tests.conftest import ROOT

UV = ROOT / ".venv/bin/uv"
PYPI = "https://pypi.org/simple/torch/"
PYTORCH_CPU = "https://download.pytorch.org/whl/cpu/torch/"
# The packages a CUDA build of torch brings: nvidia-cublas, cuda-toolkit, triton...
GPU_PACKAGE = re.compile(r"^(nvidia-|cuda-|triton$)")


def torch_pin() -> str:
    """The torch the project is tested with: the Makefile's pin."""
    pinned = re.search(r"^TORCH_PIN := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned, "the Makefile pins torch as TORCH_PIN"
    return pinned.group(1)


def need(url: str) -> None:
    """Skip, saying why, where the index at url cannot be reached from this machine."""
    if not UV.is_file():
        pytest.skip("uv comes with make setup")
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=15).close()
    except urllib.error.HTTPError:
        return  # it answered: reachable, and the resolution's own errors are the test's
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        pytest.skip(f"{url} cannot be reached from here ({error}): its resolution is unchecked")


def resolve(tmp_path, *uv_options: str, extra: str | None = None) -> dict[str, str]:
    """{name: version} that uv resolves posttrain's dependencies (and torch's pin) to, for
    CPython 3.11 on x86_64 Linux, with an empty cache and no uv config of this machine's."""
    pin = tmp_path / "pin.txt"
    pin.write_text(torch_pin() + "\n")
    command = [str(UV), "pip", "compile", "--no-config", "--quiet", "--no-header"]
    command += ["--no-annotate", "--python-version", "3.11"]
    command += ["--python-platform", "x86_64-manylinux_2_28", *uv_options]
    command += [str(ROOT / "pyproject.toml"), str(pin), *(["--extra", extra] if extra else [])]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    assert done.returncode == 0, done.stderr
    pins = (line.split("==") for line in done.stdout.splitlines() if "==" in line)
    return {name.strip(): version.strip() for name, version in pins}


def gpu_packages(resolved: dict[str, str]) -> list[str]:
    return sorted(name for name in resolved if GPU_PACKAGE.match(name))


def test_with_no_gpu_the_printed_uvx_options_resolve_torchs_cpu_build_and_no_nvidia(tmp_path):
    need(PYPI)
    need(PYTORCH_CPU)
    resolved = resolve(tmp_path, *install.CPU_TORCH_UV_ARGS, extra="dev")
    assert resolved["torch"] == torch_pin().split("==")[1] + "+cpu"
    assert gpu_packages(resolved) == []


def test_besides_torch_no_dependency_of_posttrain_pulls_an_nvidia_package(tmp_path):
    """The part of the CPU install that PyPI serves: a new dependency that brings CUDA (or a
    CUDA torch of its own) shows here, where the PyTorch index cannot be reached."""
    need(PYPI)
    excluded = tmp_path / "exclude.txt"
    excluded.write_text("torch\n")
    resolved = resolve(tmp_path, "--excludes", str(excluded), extra="dev")
    assert "transformers" in resolved and "torch" not in resolved
    assert gpu_packages(resolved) == []


def test_pypis_linux_torch_brings_the_nvidia_packages_the_cpu_build_leaves_out(tmp_path):
    """Why the CPU build is asked for, and proof that the checks above would see them."""
    need(PYPI)
    resolved = resolve(tmp_path)
    assert "+" not in resolved["torch"]
    assert "nvidia-cublas" in gpu_packages(resolved) and "triton" in resolved


def readme_install(tool: str) -> list[str]:
    """The README's CPU install for `uv pip` or `pip`, as words (the checkout's path for
    ./posttrain)."""
    table = (ROOT / "README.md").read_text().split("## What an install downloads", 1)[1]
    commands = re.findall(r"`((?:uv )?pip install [^`]+)`", table)
    command = next(c for c in commands if c.startswith(f"{tool} install") and "torch==" in c)
    return [str(ROOT) if word == "./posttrain" else word for word in command.split()]


def test_the_readmes_cpu_installs_name_the_cpu_build_and_the_makefiles_torch():
    uv_words, pip_words = readme_install("uv pip"), readme_install("pip")
    start = uv_words.index(install.CPU_TORCH_UV_ARGS[0])
    assert uv_words[start : start + 2] == install.CPU_TORCH_UV_ARGS
    assert "https://download.pytorch.org/whl/cpu" in pip_words
    assert torch_pin() in uv_words and torch_pin() in pip_words
    example = json.loads((ROOT / "examples/mcp.json").read_text())["mcpServers"]["posttrain"]
    assert example["args"][:2] == install.CPU_TORCH_UV_ARGS


def test_the_readmes_uv_install_would_install_no_nvidia_package(tmp_path):
    need(PYPI)
    need(PYTORCH_CPU)
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    venv = tmp_path / "venv"
    subprocess.run([str(UV), "venv", "-q", str(venv)], check=True, env=env, timeout=120)
    words = readme_install("uv pip")
    done = subprocess.run(
        [str(UV), *words[1:], "--no-config", "--dry-run", "--python", str(venv / "bin/python")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    planned = re.findall(r"^ \+ (\S+)==(\S+)$", done.stderr, re.M)
    assert ("torch", torch_pin().split("==")[1] + "+cpu") in planned
    assert [name for name, _ in planned if GPU_PACKAGE.match(name)] == []
