"""Asking a judge: any OpenAI-compatible chat endpoint, through httpx.

Every request has a timeout; 429s, 5xx answers and dropped connections are retried with
backoff; an endpoint still down after its retries raises JudgeUnavailable naming the endpoint
(a run must fail, not train on zeros), while a request the endpoint refuses (4xx) fails at
once with its answer. A reply the judge botched is asked once more, then its answers are None
("cannot grade"). Verdicts are cached (cache.py), and groups are judged a few at a time
(`max_concurrency`). The API key is read from the environment variable the endpoint names,
sent only in the Authorization header, and never written into an error or a log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from posttrain.core.errors import RewardError
from posttrain.core.secrets import redact
from posttrain.rewards.judge.cache import JudgeCache, cache_key
from posttrain.rewards.judge.protocol import Mode, Verdicts, messages, read_reply

BACKOFF_S = 0.5  # doubled each retry
T = TypeVar("T")


class JudgeUnavailable(RewardError):
    """The judge endpoint did not answer (or refused); never scored as 0."""


@dataclass(frozen=True)
class Endpoint:
    """A judge: where it is and how to ask it (plain data: it crosses to the trainer)."""

    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str
    api_key_env: str | None = None  # the name of the variable holding the key, never the key
    timeout_s: float = 60.0
    retries: int = 3
    max_concurrency: int = 4
    max_tokens: int = 512

    @property
    def judge_id(self) -> str:
        return f"{self.base_url.rstrip('/')}|{self.model}"

    def headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if self.api_key_env and not key:
            raise JudgeUnavailable(
                f"judge at {self.base_url}: the environment variable {self.api_key_env} that "
                f"should hold its API key is not set; set it where the run starts"
            )
        return {"Authorization": f"Bearer {key}"} if key else {}


def retried(
    endpoint: Endpoint,
    send: Callable[[], Any],
    read: Callable[[Any], tuple[T | None, str | None]],
    fix: str,
) -> T:
    """send() until read() takes its answer: dropped connections, 429s and 5xx answers are
    retried with backoff, as is an answer read() turns down (value None, why); one still not
    taken after the retries raises JudgeUnavailable naming the endpoint, and `fix`."""
    import httpx

    last = "no answer"
    for attempt in range(endpoint.retries + 1):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        try:
            answer = send()
        except httpx.HTTPError as exc:
            last = type(exc).__name__
            continue
        if answer.status_code == 429 or answer.status_code >= 500:
            last = f"HTTP {answer.status_code}"
            continue
        value, why = read(answer)
        if why is None:
            return value  # type: ignore[return-value]
        last = why
    raise JudgeUnavailable(
        f"judge at {endpoint.base_url} did not answer after {endpoint.retries + 1} tries "
        f"({last}); {fix}"
    )


def ask(endpoint: Endpoint, chat: list[dict[str, str]], client: Any) -> str:
    """The judge's reply text to one chat."""
    url = endpoint.base_url.rstrip("/") + "/chat/completions"
    body = {
        "model": endpoint.model,
        "messages": chat,
        "temperature": 0,
        "max_tokens": endpoint.max_tokens,
    }
    headers = endpoint.headers()

    def read(answer: Any) -> tuple[str | None, str | None]:
        if answer.status_code >= 400:
            raise JudgeUnavailable(
                f"judge at {endpoint.base_url} refused the request: HTTP {answer.status_code} "
                f"{redact(answer.text[:200])}; check its model name ({endpoint.model}) and key"
            )
        try:
            return str(answer.json()["choices"][0]["message"]["content"] or ""), None
        except (ValueError, KeyError, IndexError, TypeError):
            return None, f"a reply that is not a chat completion: {redact(answer.text[:120])!r}"

    return retried(
        endpoint,
        lambda: client.post(url, json=body, headers=headers, timeout=endpoint.timeout_s),
        read,
        "check that the endpoint is up and reachable from where the run trains",
    )


@dataclass(frozen=True)
class Group:
    """One prompt's answers, to be judged together (group mode) or one by one (single)."""

    prompt: str
    answers: list[str]
    reference: str | None = None  # shown to the judge as the row's reference answer


def judge_one(
    endpoint: Endpoint,
    rubric: str,
    group: Group,
    mode: Mode,
    client: Any,
    cache: JudgeCache | None,
) -> Verdicts:
    """One prompt's answers judged: from the cache, else asked (a botched reply once more).
    An answer given twice is shown once and both copies get its verdict."""
    unique = list(dict.fromkeys(group.answers))
    key = cache_key(endpoint.judge_id, rubric, group.prompt, unique, mode, group.reference)
    if cache is not None and (found := cache.get(key)) is not None:
        verdicts = Verdicts(*found)
    else:
        chat = messages(rubric, group.prompt, unique, mode, group.reference)
        verdicts = read_reply(ask(endpoint, chat, client), len(unique))
        verdicts.asked = 1
        if None in verdicts.scores:
            again = read_reply(ask(endpoint, chat, client), len(unique))
            if again.scores.count(None) < verdicts.scores.count(None):
                again.problems = verdicts.problems + again.problems
                verdicts = again
            verdicts.asked = 2
        if cache is not None:
            cache.put(key, verdicts.scores, verdicts.reasons)
    if len(unique) == len(group.answers):
        return verdicts
    at = {answer: i for i, answer in enumerate(unique)}
    return Verdicts(
        [verdicts.scores[at[a]] for a in group.answers],
        [verdicts.reasons[at[a]] for a in group.answers],
        verdicts.problems,
        verdicts.asked,
    )


def judge_groups(
    endpoint: Endpoint,
    rubric: str,
    groups: list[Group] | list[tuple[str, list[str]]],
    mode: Mode,
    cache: JudgeCache | None = None,
) -> list[Verdicts]:
    """Each group judged, a few at a time. In single mode each answer is its own request;
    the verdicts come back one a group, in order."""
    import httpx

    asked = [g if isinstance(g, Group) else Group(*g) for g in groups]
    jobs = (
        asked
        if mode == "group"
        else [Group(g.prompt, [answer], g.reference) for g in asked for answer in g.answers]
    )
    with httpx.Client() as client, ThreadPoolExecutor(endpoint.max_concurrency) as pool:
        done = list(
            pool.map(lambda job: judge_one(endpoint, rubric, job, mode, client, cache), jobs)
        )
    if mode == "group":
        return done
    out, at = [], 0
    for group in asked:
        part = done[at : at + len(group.answers)]
        at += len(group.answers)
        out.append(
            Verdicts(
                [v.scores[0] for v in part],
                [v.reasons[0] for v in part],
                [p for v in part for p in v.problems],
                sum(v.asked for v in part),
            )
        )
    return out


def reachable(endpoint: Endpoint) -> str:
    """Fail fast, before a model loads, when the judge is down: GET {base_url}/models, retried
    like a request. Returns what answered, in one line."""
    import httpx

    url = endpoint.base_url.rstrip("/") + "/models"
    headers = endpoint.headers()

    def read(answer: Any) -> tuple[str, None]:
        if answer.status_code in (401, 403):
            raise JudgeUnavailable(
                f"judge at {endpoint.base_url} refused the key (HTTP {answer.status_code}); "
                f"check the variable {endpoint.api_key_env or '(none named: api_key_env)'}"
            )
        # some servers have no /models (404): they answered, the chat request will tell
        return f"judge at {endpoint.base_url} answered (HTTP {answer.status_code})", None

    with httpx.Client() as client:
        return retried(
            endpoint,
            lambda: client.get(url, headers=headers, timeout=min(endpoint.timeout_s, 10.0)),
            read,
            "start it, or fix reward.params.base_url, before the run",
        )
