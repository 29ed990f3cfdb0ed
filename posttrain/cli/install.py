"""How posttrain is installed and started: the torch build this machine should take, and the
entry an MCP client starts the server with. The standard library only: `make setup` runs
`python -m posttrain.cli.install` with the system Python, before any venv exists, to ask which
torch build to install, so the printed config and the documented install decide it here, once.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

# Signs of an NVIDIA GPU that cost no import of torch: the Linux driver's files (on the host,
# and in a container given a GPU) and its nvidia-smi. CUDA_VISIBLE_DEVICES is not read: it
# hides GPUs from one process, and the install is for the machine (an MCP client starts the
# server with its own environment, not the shell's).
NVIDIA_DRIVER_FILES = (
    Path("/proc/driver/nvidia/version"),
    Path("/sys/module/nvidia/version"),
    Path("/dev/nvidiactl"),
)
NVIDIA_SMI = "nvidia-smi"

# PyPI's torch for Linux (x86_64 and aarch64) is the CUDA build: 2.13.0 lists 18 nvidia/cuda
# packages and triton, 2.7 GB of the 3.0 GB a CPU machine downloads (5.9 GB unpacked in uv's
# cache, a 6.3 GB venv). The CPU build lives on PyTorch's index; uv's --torch-backend sends
# torch's own packages there and everything else to PyPI. On macOS and Windows PyPI's torch
# pulls no nvidia package, so nothing is added there.
CPU_TORCH_UV_ARGS = ["--torch-backend", "cpu"]


def cuda_device_present() -> bool:
    """Whether this machine has an NVIDIA GPU that a CUDA build of torch could use."""
    return any(path.exists() for path in NVIDIA_DRIVER_FILES) or bool(shutil.which(NVIDIA_SMI))


def uv_torch_args() -> list[str]:
    """uv's options that choose torch's build here (none where PyPI's own build fits)."""
    if sys.platform.startswith("linux") and not cuda_device_present():
        return list(CPU_TORCH_UV_ARGS)
    return []


def server_entry(uvx: str | None, project: Path) -> dict[str, Any]:
    """How a client starts this server: uvx from a source (taking the torch build this machine
    fits), else this installation's own `posttrain` (or this interpreter's -m posttrain.cli)."""
    env = {"POSTTRAIN_ROOTS": str(project)}
    if uvx:
        args = [*uv_torch_args(), "--from", uvx, "posttrain", "serve"]
        return {"command": "uvx", "args": args, "env": env}
    script = Path(sys.executable).parent / "posttrain"
    if script.is_file():
        return {"command": str(script), "args": ["serve"], "env": env}
    return {"command": sys.executable, "args": ["-m", "posttrain.cli", "serve"], "env": env}


def _claude_desktop_config() -> Path:
    import os

    if sys.platform == "darwin":
        return Path.home() / "Library/Application Support/Claude/claude_desktop_config.json"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / "Claude/claude_desktop_config.json"
    return Path.home() / ".config/Claude/claude_desktop_config.json"


CONFIG_FILES = {
    "claude-code": lambda: Path(".mcp.json"),  # the project's, shared with its team
    "claude-desktop": _claude_desktop_config,
}


if __name__ == "__main__":  # `make setup`: the uv options, on one line
    print(" ".join(uv_torch_args()))
