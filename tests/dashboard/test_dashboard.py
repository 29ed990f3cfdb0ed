"""The dashboard in a real headless Chromium, against a real run of the tiny model."""

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from posttrain.tools.evaluate import evaluate
from tests.conftest import free_port, trained_run
from tests.dashboard.conftest import dashboard, status_of

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STEPS = 8
SPEC = {
    "name": "dashboard test",
    "dataset": {
        "builtin": "rhyme-gym",
        "n_rows": 200,
        "system_prompt": "answer in rhyme",
        "holdout_share": 0.2,
    },
    "reward": "rhyme_relevance",
    "algorithm": {
        "steps": STEPS,
        "lora": None,
        "learning_rate": 5e-4,
        "batch_size": 16,
        "num_generations": 4,
        "max_completion_length": 24,
        "save_every": 0,
        "traces": {"every": 2, "samples": 4},
    },
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A finished, evaluated run and the dashboard serving it."""
    with trained_run(tmp_path_factory, SPEC) as (home, run_id):
        evaluate(run_id, k=2, max_tasks=20)
        with dashboard(home) as url:
            yield url, home, run_id


def _body(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.read().decode()


def test_a_supervisor_sees_the_run_its_curve_and_its_real_samples(site, tmp_path):
    from playwright.sync_api import sync_playwright

    url, home, run_id = site
    stored = {
        json.loads(line)["completion"]
        for f in (home / "runs" / run_id / "traces").glob("step_*.jsonl")
        for line in f.read_text().splitlines()
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/")
        row = page.locator(f"tr[data-run='{run_id}']")
        assert row.count() == 1 and "succeeded" in row.inner_text()
        page.click(f"a[href='/runs/{run_id}']")
        page.wait_for_selector("#reward-chart")
        assert page.locator("#reward-chart circle.pt").count() == STEPS
        assert page.locator("#verdict").inner_text().startswith(("unproven:", "insufficient"))
        assert page.locator("#eval-table tbody tr").count() >= 3
        cards = page.locator("#trace-viewer .card")
        assert [cards.nth(i).get_attribute("data-step") for i in range(cards.count())] == [
            "1",
            str(STEPS),
        ]  # an early step beside the last one
        first = page.locator("#trace-viewer pre.completion").first.inner_text()
        assert first.strip() in {c.strip() for c in stored}
        page.select_option("select[name=step]", "4")
        page.select_option("select[name=order]", "worst")
        page.click("form[action$='#traces'] button")
        page.wait_for_selector("#trace-viewer .card[data-step='4']")
        assert page.locator(
            "#trace-viewer .card[data-step='4'] pre.completion"
        ).first.inner_text().strip() in {c.strip() for c in stored}
        page.fill("form[action$='#logs'] input[name=q]", "training rows")
        page.click("form[action$='#logs'] button")
        assert "training rows" in page.locator("#log-lines").inner_text()
        shot = tmp_path / "dashboard-run.png"
        page.screenshot(path=str(shot), full_page=True)
        page.goto(url + "/")
        page.screenshot(path=str(tmp_path / "dashboard-runs.png"))
        browser.close()
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("POSTTRAIN_SCREENSHOTS")
    if keep:  # for a person to look at
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def test_an_unknown_run_is_a_404_page_not_a_traceback(site):
    url, _, _ = site
    assert status_of(url + "/runs/run-000000-000000-dead") == 404
    body = _body(url + "/runs/run-000000-000000-dead")
    assert "Not found" in body and "no run" in body and "Traceback" not in body
    assert status_of(url + "/runs/NOT%20A%20RUN") == 404
    assert status_of(url + "/?status=exploded") == 404


@pytest.mark.parametrize(
    "path",
    [
        "/runs/..%2F..%2F..%2Fetc%2Fpasswd",
        "/runs/../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/api/runs/..%2f..%2fetc%2fpasswd",
        "/runs/run-x/reward.png/../../../../etc/passwd",
        "/fragments/runs/..%2F..%2Fhome/summary",
        "/static/../../etc/passwd",
    ],
)
def test_no_path_outside_the_runs_home_can_be_read(site, path):
    url, _, _ = site
    body = _body(url + path)
    assert status_of(url + path) in (400, 404)
    assert "root:" not in body


def test_a_foreign_host_header_is_refused(site):
    url, _, _ = site
    request = urllib.request.Request(url + "/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400


def test_the_dashboard_refuses_a_public_address_without_a_token(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "posttrain.cli",
            "dashboard",
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
    assert out.returncode == 2 and "without a token" in out.stderr


def test_with_a_token_every_page_needs_it(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from posttrain.dashboard.app import build_app

    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path))
    client = TestClient(build_app(token="s3cret-token", allowed_hosts=["testserver"]))
    assert client.get("/").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    assert client.get("/login").status_code == 200  # the sign-in form needs no token
    assert client.get("/login?token=s3cret-token").status_code == 200  # a URL signs no one in
    assert client.get("/").status_code == 401
    assert client.post("/login", data={"token": "wrong"}).status_code == 401
    signed_in = client.post("/login", data={"token": "s3cret-token"}, follow_redirects=False)
    assert signed_in.status_code == 303 and "httponly" in signed_in.headers["set-cookie"].lower()
    assert client.get("/").status_code == 200  # the cookie the POST set


def test_get_run_returns_the_reward_curve_as_an_image(site, monkeypatch):
    import asyncio
    import base64

    from mcp import Client

    from posttrain.server.app import build_server

    _, home, run_id = site
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            return await client.call_tool("get_run", {"run_id": run_id, "plot": True})

    result = asyncio.run(main())
    assert not result.is_error and result.structured_content["run_id"] == run_id
    image = [c for c in result.content if c.type == "image"]
    assert image and image[0].mime_type == "image/png"
    assert base64.b64decode(image[0].data).startswith(b"\x89PNG")
