"""What a judge costs a run: its calls, their tokens, and a price per token.

Calls: group mode asks once a prompt a step (batch_size / num_generations), single once a
completion (batch_size); no cache hit is assumed. Tokens in a call: the rubric and the prompt
(max_prompt_length, the most it may be), each answer at max_completion_length, and the
protocol's own words; out: max_tokens, the most a reply may be. The worst case counts every
call asked twice (a botched reply is asked once more). An endpoint on this machine is free;
another is priced from params.price_per_mtok, else from the table below by model name, else
refused: a price nobody can state cannot be approved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlparse

from posttrain.core.errors import ConfigError
from posttrain.core.net import is_loopback

# USD per million tokens [in, out], providers' list prices as the table's date says; check your
# provider's page and override with params.price_per_mtok when they differ.
JUDGE_PRICES_AS_OF = "2025-06 list prices (check your provider's page)"
JUDGE_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1": (2.00, 8.00),
}
PROTOCOL_TOKENS = 120  # the question/answer tags and the reply instruction
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class JudgeCost:
    endpoint: str
    model: str
    mode: str
    calls: int
    tokens_in: int
    tokens_out: int
    usd_per_mtok: tuple[float, float]
    price_source: str
    expected_usd: float
    worst_case_usd: float  # every call asked twice

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def on_this_machine(base_url: str) -> bool:
    """An endpoint on this machine (free), by its host."""
    return is_loopback(urlparse(base_url).hostname or "")


def price_of(reward: Any) -> tuple[tuple[float, float], str]:
    """The judge's price per million tokens, and where it came from."""
    if on_this_machine(reward.base_url):
        return (0.0, 0.0), "an endpoint on this machine: free"
    if reward.price_per_mtok is not None:
        return tuple(reward.price_per_mtok), "params.price_per_mtok"
    name = reward.model.rsplit("/", 1)[-1].lower()
    for known in sorted(JUDGE_PRICES, key=len, reverse=True):  # gpt-4o-mini before gpt-4o
        if name.startswith(known):
            return JUDGE_PRICES[known], f"posttrain's table ({JUDGE_PRICES_AS_OF}) for {known}"
    raise ConfigError(
        f"reward 'judge': no price is known for model {reward.model!r} at {reward.base_url}, "
        f"and a price nobody can state cannot be approved: give params.price_per_mtok "
        f"[USD in, USD out] per million tokens ([0, 0] for your own free server)"
    )


def judge_cost(reward: Any, algorithm: Any, steps: int) -> JudgeCost:
    """The judge's share of a run of `steps` steps of `algorithm` (a spec's)."""
    generations = getattr(algorithm, "num_generations", 1) or 1
    group = reward.mode == "group"
    chunks = -(-generations // reward.max_group)  # a group past max_group is split
    per_step = (algorithm.batch_size // generations) * chunks if group else algorithm.batch_size
    answers = min(generations, reward.max_group) if group else 1
    calls = max(1, per_step) * steps
    if every := getattr(algorithm, "eval_every", 0):  # the held-out curve: one answer a task
        calls += (1 + steps // every) * algorithm.eval_tasks
    return priced(
        reward,
        calls,
        algorithm.max_prompt_length + answers * algorithm.max_completion_length,
    )


def evaluation_cost(
    reward: Any, answers: int, prompt_tokens: int, completion_tokens: int
) -> JudgeCost:
    """A judge's share of an evaluation that asks it about `answers` answers, one a call
    (single mode; a repeated answer comes from the cache, so this is the most)."""
    return priced(reward, answers, prompt_tokens + 2 * completion_tokens)  # and a reference


def priced(reward: Any, calls: int, tokens_a_call: int) -> JudgeCost:
    """`calls` requests of `tokens_a_call` tokens (the question and answers) to this judge,
    each with its rubric and the protocol's words, and max_tokens back."""
    (usd_in, usd_out), source = price_of(reward)
    rubric = len(reward.rubric_text) // CHARS_PER_TOKEN
    tokens_in = calls * (rubric + tokens_a_call + PROTOCOL_TOKENS)
    tokens_out = calls * reward.max_tokens
    expected = (tokens_in * usd_in + tokens_out * usd_out) / 1e6
    return JudgeCost(
        endpoint=reward.base_url,
        model=reward.model,
        mode=reward.mode,
        calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usd_per_mtok=(usd_in, usd_out),
        price_source=source,
        expected_usd=round(expected, 2),
        worst_case_usd=round(2 * expected, 2),
    )
