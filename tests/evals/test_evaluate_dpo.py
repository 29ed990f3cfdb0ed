"""evaluate of a DPO run: held-out preference accuracy, base against trained, on a real tiny
run; the trained arm's accuracy checked against plain transformers on the run's weights."""

import random

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.data import gym
from tests.conftest import answer_logps, evaluated, trained_run
from tests.specs import small_full_run

pytestmark = pytest.mark.slow


def pairs(n: int) -> list[dict]:
    rng = random.Random(1)
    out = []
    for i, row in enumerate(gym.rows(n)):
        topics = gym.pick_topics(rng)
        out.append(
            {"id": f"pair{i}", "ask": row["prompt"],
             "rhymes": gym.verse(topics, rng, rhyming=True),
             "does_not": gym.verse(topics, rng, rhyming=False)}
        )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def dpo_run(tmp_path_factory):
    spec = small_full_run(
        "dpo", prompt_column="ask", chosen_column="rhymes", rejected_column="does_not"
    )
    with trained_run(tmp_path_factory, spec, pairs(90), "pairs.jsonl") as run:
        yield run


def logp(model, tokenizer, prompt: list[dict], answer: str) -> float:
    """The answer's summed log-likelihood after the prompt, by plain transformers."""
    return sum(answer_logps(model, tokenizer, prompt, [{"role": "assistant", "content": answer}]))


def test_evaluate_reports_held_out_preference_accuracy_as_the_models_own_likelihoods_say(
    dpo_run, monkeypatch
):
    result, model, tokenizer, held = evaluated(dpo_run, monkeypatch)
    accuracy = result.metrics[0]
    dpo = algorithm_of("dpo")  # the unit says what evaluate reports of a DPO run
    assert accuracy.name == dpo.headline_metric == "preference_accuracy" and accuracy.optimised
    assert [m.name for m in result.unoptimised][:2] == list(dpo.unoptimised_metrics)
    assert accuracy.base_pass_means[0] == accuracy.base_pass_means[-1]  # deterministic: they agree

    prefers = [
        logp(model, tokenizer, r["prompt"], r["chosen"][0]["content"])
        > logp(model, tokenizer, r["prompt"], r["rejected"][0]["content"])
        for r in held
    ]
    assert accuracy.trained_mean == pytest.approx(sum(prefers) / len(prefers))
