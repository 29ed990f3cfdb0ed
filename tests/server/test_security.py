"""Security: who can reach the server, and secrets that never leave it."""

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mcp import Client

from posttrain.runs.layout import FINAL_STATUSES
from posttrain.server.app import build_server
from tests.conftest import free_port, kill_leftover_runs, wait_listening

SENTINEL = "sentinel-7f3a9c1e5b2d4068"
SECRETS = {
    "MODAL_TOKEN_SECRET": SENTINEL + "-modal",
    "HF_TOKEN": SENTINEL + "-hf",
    "ACME_API_KEY": SENTINEL + "-acme",
}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def post(url: str, headers: dict[str, str]) -> int:
    """POST an MCP initialize with exactly these headers; the HTTP status."""
    request = urllib.request.Request(
        url, data=json.dumps(INIT).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def serve(home: Path, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "posttrain.cli", *args, "--port", str(port)],
        env={**os.environ, "POSTTRAIN_HOME": str(home), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    wait_listening(port)
    return proc, port


def test_a_public_address_is_refused_without_a_token(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "posttrain.cli",
            "serve",
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        env={**os.environ, "POSTTRAIN_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "without a bearer token" in out.stderr


def test_with_a_token_every_request_needs_it(tmp_path):
    token = "t0ken-" + "x" * 30
    proc, port = serve(
        tmp_path, "serve", "--http", "--host", "0.0.0.0", env={"POSTTRAIN_SERVER_TOKEN": token}
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert post(url, HEADERS) == 401
        assert post(url, {**HEADERS, "authorization": "Bearer nope"}) == 401
        assert post(url, {**HEADERS, "authorization": f"Bearer {token}"}) == 200
    finally:
        proc.kill()


def test_loopback_checks_host_and_origin_against_dns_rebinding(tmp_path):
    proc, port = serve(tmp_path, "serve", "--http")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert post(url, HEADERS) == 200
        assert post(url, {**HEADERS, "host": "evil.example"}) in (400, 403, 421)
        assert post(url, {**HEADERS, "origin": "http://evil.example"}) in (400, 403)
        assert post(url, {**HEADERS, "origin": f"http://127.0.0.1:{port}"}) == 200
    finally:
        proc.kill()


@pytest.mark.slow
def test_planted_secrets_appear_in_no_output_and_no_file(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    Path("leaky.py").write_text(  # a reward that puts secrets in its error messages
        "import os\n"
        "def score(completions, **kw):\n"
        "    raise ValueError('cannot score: token ' + os.environ['HF_TOKEN'] + ' key '"
        " + os.environ['ACME_API_KEY'])\n"
    )
    Path("data.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "prompt": f"write a poem about the sea {i}",
                    "reference": "the sea is blue and wide",
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    spec = {
        "dataset": {
            "builtin": "rhyme-gym",
            "n_rows": 120,
            "holdout_share": 0.2,
            "system_prompt": "answer in rhyme",
        },
        "reward": "rhyme_relevance",
        "algorithm": {
            "lora": None,
            "learning_rate": 5e-4,
            "batch_size": 8,
            "num_generations": 4,
            "max_completion_length": 16,
            "traces": {"samples": 2},
        },
    }
    outputs: list[str] = []

    async def lifecycle():
        async with Client(build_server(), mode="legacy") as client:

            async def call(tool, args):
                result = await client.call_tool(tool, args)
                outputs.append(json.dumps([c.model_dump() for c in result.content]))
                outputs.append(json.dumps(result.structured_content))
                return result

            await call("plan", {"spec": spec})
            await call("check_dataset", {"spec": spec})
            leaky = await call("check_reward", {"reward": "leaky.py:score", "data": "data.jsonl"})
            assert leaky.is_error and "[redacted]" in leaky.content[0].text
            smoke = await call("smoke_run", {"spec": spec, "steps": 2})
            run_id = smoke.structured_content["run_id"]
            failing = await call(
                "smoke_run", {"spec": {**spec, "reward": "leaky.py:score"}, "steps": 1}
            )
            failing_id = failing.structured_content["run_id"] if not failing.is_error else None
            deadline = time.time() + 240
            while time.time() < deadline:
                got = (await call("get_run", {"run_id": run_id})).structured_content
                if got["status"] in FINAL_STATUSES:
                    break
                await asyncio.sleep(1)
            assert got["status"] == "succeeded", got
            await call("tail_logs", {"run_id": run_id, "tail": 200})
            await call("sample_traces", {"run_id": run_id, "n": 4})
            await call("evaluate", {"run_id": run_id, "k": 1, "max_tasks": 10})
            await call("get_run", {"run_id": run_id, "verbose": True})
            await call("list_runs", {})
            if failing_id:
                await call("get_run", {"run_id": failing_id})
                await call("tail_logs", {"run_id": failing_id, "tail": 200})
            await call("cancel_run", {"run_id": run_id})
            return run_id

    try:
        run_id = asyncio.run(lifecycle())
        proc, port = serve(home, "dashboard")
        try:
            for path in (
                "/",
                f"/runs/{run_id}",
                f"/api/runs/{run_id}",
                "/api/runs",
                "/runs/run-000000-000000-dead",
            ):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
                        outputs.append(r.read().decode())
                except urllib.error.HTTPError as exc:
                    outputs.append(exc.read().decode())
        finally:
            proc.kill()
            outputs.append(proc.communicate()[1].decode(errors="replace"))
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "posttrain.cli",
                "reward",
                "check",
                "leaky.py:score",
                "--data",
                "data.jsonl",
            ],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        outputs += [cli.stdout, cli.stderr]
    finally:
        kill_leftover_runs(home)

    leaks = [o[:200] for o in outputs if SENTINEL in o]
    assert not leaks, leaks
    for path in home.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path
