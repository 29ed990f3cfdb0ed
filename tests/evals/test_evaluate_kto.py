"""evaluate of a KTO run: base against trained on the held-out feedback rows, each answer's
mean token log-likelihood signed by its verdict (👍 likelier, 👎 less likely), paired by row,
with an interval; the trained arm's figure checked against plain transformers on the run's
weights."""

import random

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.data import gym
from tests.conftest import answer_logps, evaluated, trained_run
from tests.specs import small_full_run

pytestmark = pytest.mark.slow


def feedback(n: int) -> list[dict]:
    """Rhyming answers rated 👍, flat ones 👎: a product's thumbs, with its own columns."""
    rng = random.Random(2)
    out = []
    for i, row in enumerate(gym.rows(n)):
        good = i % 2 == 0
        verse = gym.verse(gym.pick_topics(rng), rng, rhyming=good)
        out.append({"id": f"fb{i}", "ask": row["prompt"], "reply": verse,
                    "thumb": "👍" if good else "👎"})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def kto_run(tmp_path_factory):
    spec = small_full_run("kto", prompt_column="ask", response_column="reply", label_column="thumb")
    with trained_run(tmp_path_factory, spec, feedback(90), "feedback.jsonl") as run:
        yield run


def mean_logp(model, tokenizer, prompt: list[dict], answer: list[dict]) -> float:
    """The answer's mean token log-likelihood after the prompt, by plain transformers."""
    picked = answer_logps(model, tokenizer, prompt, answer)
    return sum(picked) / len(picked)


def test_evaluate_reports_the_signed_feedback_likelihood_as_the_models_own_likelihoods_say(
    kto_run, monkeypatch
):
    result, model, tokenizer, held = evaluated(kto_run, monkeypatch)
    signed = result.metrics[0]
    kto = algorithm_of("kto")  # the unit says what evaluate reports of a KTO run
    assert signed.name == kto.headline_metric == "feedback_loglik" and signed.optimised
    names = [m.name for m in result.unoptimised]
    assert names[: len(kto.unoptimised_metrics)] == list(kto.unoptimised_metrics)
    assert signed.base_pass_means[0] == signed.base_pass_means[-1]  # deterministic: they agree
    assert signed.ci_low is not None and signed.ci_low <= signed.delta <= signed.ci_high

    assert {r["label"] for r in held} == {True, False}
    values = [
        (1 if r["label"] else -1) * mean_logp(model, tokenizer, r["prompt"], r["completion"])
        for r in held
    ]
    assert signed.trained_mean == pytest.approx(sum(values) / len(values), abs=2e-3)
