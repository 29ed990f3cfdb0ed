"""The server and the CLI start fast and light: MCP clients start the server at every session
and give up on a slow one, so no training library loads before a tool needs it, and a refusal
to serve comes before the server is built. (bench/startup.py prints the timing figures.)"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

# The training stack (torch, transformers, peft, datasets, trl, sentence-transformers) and the
# other libraries that cost start-up seconds: scipy (~0.5 s) and modal (~0.5 s).
HEAVY = ("torch", "transformers", "peft", "datasets", "trl", "sentence_transformers", "scipy")
HEAVY += ("modal",)
PUBLIC_SERVE = ("serve", "--http", "--host", "0.0.0.0")
BENCH = ROOT / "bench" / "startup.py"

IMPORT_EVERYTHING_THE_SERVER_DOES = """
import importlib, json, pkgutil, sys
import posttrain.cli.app, posttrain.server.app, posttrain.tools
for info in pkgutil.iter_modules(posttrain.tools.__path__):
    importlib.import_module("posttrain.tools." + info.name)
posttrain.server.app.build_server()
heavy = set(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def no_server_token(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_SERVER_TOKEN"}
    return {**env, "POSTTRAIN_HOME": str(home)}


def test_the_server_the_cli_and_every_tool_import_without_the_training_libraries(tmp_path):
    out = subprocess.run(  # a fresh interpreter: this one has imported them for other tests
        [sys.executable, "-c", IMPORT_EVERYTHING_THE_SERVER_DOES, *HEAVY],
        env=no_server_token(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_a_public_address_without_a_token_is_refused_before_the_server_is_built(tmp_path):
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "posttrain.cli", *PUBLIC_SERVE],
        env=no_server_token(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed_s = time.monotonic() - started
    timings = [line for line in out.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in timings}
    errors = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    message = errors[0]["error"]
    assert "without a bearer token" in message and "POSTTRAIN_SERVER_TOKEN" in message
    assert "posttrain.server.app" not in imported and "mcp" not in imported
    assert elapsed_s < 10  # loose: the figure (~0.5 s) is bench/startup.py's


def test_serve_answers_initialize_over_stdio_without_loading_the_training_stack():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--starts", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tools"] > 10
    # torch alone takes the resident set past 400 MB; the server without it stays near 80 MB
    assert result["peak_rss_mb"]["max"] < 250
    assert result["initialize_s"]["max"] < 20  # loose: a busy shared machine; goal 1.5 s
    assert result["refusal_exit_codes"] == [2]
