"""What the dashboard's browser tests share: a dashboard served from a real process."""

import contextlib
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port, wait_for


def status_of(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


@contextlib.contextmanager
def dashboard(home: Path) -> Iterator[str]:
    """`posttrain dashboard` over this home, on a free port, until the block ends: its URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", "dashboard", "--port", str(port)],
        env={**os.environ, "POSTTRAIN_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: status_of(url + "/") == 200, timeout_s=30, every_s=0.3)
        yield url
    finally:
        server.terminate()
        server.wait(10)
