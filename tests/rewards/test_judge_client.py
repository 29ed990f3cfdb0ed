"""Asking a real judge: `transformers serve` (transformers' own OpenAI-compatible server) with
SmolLM2-135M-Instruct, started on a free port, as a user's local judge would run. The rubric
reaches the endpoint, a repeated answer costs nothing, an endpoint that is down fails with its
address and never a score, and a planted API key never appears in an error."""

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from posttrain.rewards.judge.cache import JudgeCache
from posttrain.rewards.judge.client import Endpoint, JudgeUnavailable, judge_groups
from tests.conftest import free_port, wait_for

pytestmark = pytest.mark.slow

RUBRIC = "You grade arithmetic. A correct final number scores 1, a wrong one 0."


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    """A local judge endpoint serving the real small model, and where it logs requests."""
    from posttrain.gpu.weights import local_folder

    folder = local_folder("HuggingFaceTB/SmolLM2-135M-Instruct")
    port = free_port()
    log = tmp_path_factory.mktemp("judge") / "serve.log"
    serve = Path(sys.executable).parent / "transformers"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(serve), "serve", str(folder), "--port", str(port), "--device", "cpu"],
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://localhost:{port}/v1"
    try:
        wait_for(lambda: _up(url), timeout_s=180, every_s=1.0)
        yield Endpoint(base_url=url, model=str(folder), max_tokens=64), log
    finally:
        server.terminate()
        server.wait(20)


def test_a_real_judge_scores_answers_and_a_repeated_answer_hits_the_cache(judge, tmp_path):
    endpoint, _ = judge
    cache = JudgeCache(tmp_path / "judge.sqlite")
    groups = [("What is 2+2?", ["4", "5"]), ("What is 3+3?", ["6"])]
    first = judge_groups(endpoint, RUBRIC, groups, "single", cache)
    scores = [s for v in first for s in v.scores]
    assert [len(v.scores) for v in first] == [2, 1]
    assert all(s is None or 0.0 <= s <= 1.0 for s in scores)  # read and clamped, or None
    readable = sum(s is not None for s in scores)
    assert readable >= 1, [v.problems for v in first]  # the small judge answers a lone answer
    assert cache.misses == 3 and cache.hits == 0
    again = judge_groups(endpoint, RUBRIC, groups, "single", cache)
    assert cache.hits == readable  # each answer judged readably costs nothing the second time
    for before, after in zip(first, again, strict=True):
        for s, t in zip(before.scores, after.scores, strict=True):
            if s is not None:  # a stored verdict comes back as it was
                assert t == s
    grouped = judge_groups(endpoint, RUBRIC, groups[:1], "group", cache)
    assert len(grouped) == 1 and len(grouped[0].scores) == 2  # one request for the group


def test_the_rubric_is_what_the_endpoint_is_sent(judge, tmp_path, monkeypatch):
    import httpx

    endpoint, _ = judge
    sent = []
    real_post = httpx.Client.post

    def recording(self, url, **kw):  # the real request, read on its way out
        sent.append(kw["json"])
        return real_post(self, url, **kw)

    monkeypatch.setattr(httpx.Client, "post", recording)
    judge_groups(endpoint, RUBRIC, [("What is 9+1?", ["10"])], "single", None)
    assert sent and sent[0]["messages"][0] == {"role": "system", "content": RUBRIC}
    assert '<answer id="0">\n10\n</answer>' in sent[0]["messages"][1]["content"]


def test_an_endpoint_that_is_down_fails_naming_it_and_never_shows_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", "sk-planted-secret-value-123")
    down = Endpoint(
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="any",
        api_key_env="JUDGE_KEY_FOR_TEST",
        retries=1,
        timeout_s=2,
    )
    with pytest.raises(JudgeUnavailable) as raised:
        judge_groups(down, RUBRIC, [("q", ["a"])], "group", JudgeCache(tmp_path / "c.sqlite"))
    text = str(raised.value)
    assert down.base_url in text and "did not answer after 2 tries" in text
    assert "sk-planted" not in text
    monkeypatch.delenv("JUDGE_KEY_FOR_TEST")
    with pytest.raises(JudgeUnavailable, match="JUDGE_KEY_FOR_TEST that should hold its API key"):
        judge_groups(down, RUBRIC, [("q", ["a"])], "group", None)
