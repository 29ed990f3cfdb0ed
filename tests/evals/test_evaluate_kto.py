"""evaluate of a KTO run: base against trained on the held-out feedback rows, each answer's
mean token log-likelihood signed by its verdict (👍 likelier, 👎 less likely), paired by row,
with an interval; the trained arm's figure checked against plain transformers on the run's
weights."""

import json
import random

import pytest

from posttrain.data import gym
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from tests.conftest import kill_leftover_runs, wait_finished

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
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        data = home / "feedback.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in feedback(90)))
        spec = {
            "dataset": {
                "path": str(data),
                "prompt_column": "ask",
                "response_column": "reply",
                "label_column": "thumb",
                "system_prompt": "answer in rhyme",
                "holdout_share": 0.3,
            },
            "algorithm": {
                "kind": "kto",
                "lora": None,
                "steps": 8,
                "batch_size": 8,
                "learning_rate": 5e-4,
                "max_completion_length": 24,
                "save_every": 0,
            },
        }
        run_id = launch(spec).run_id
        detail = wait_finished(run_id, 300)
        assert detail.status == "succeeded", detail.cause
        yield home, run_id
        kill_leftover_runs(home)


def mean_logp(model, tokenizer, prompt: list[dict], answer: list[dict]) -> float:
    """The answer's mean token log-likelihood after the prompt, by plain transformers."""
    import torch

    def ids(messages, **kw):
        return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **kw)[
            "input_ids"
        ]

    head = ids(prompt, add_generation_prompt=True)
    full = ids([*prompt, *answer])
    start = next((i for i, (a, b) in enumerate(zip(head, full, strict=False)) if a != b), len(head))
    with torch.inference_mode():
        scores = model(torch.tensor([full])).logits[0].float().log_softmax(-1)
    picked = [float(scores[i - 1, full[i]]) for i in range(start, len(full))]
    return sum(picked) / len(picked)


def test_evaluate_reports_the_signed_feedback_likelihood_as_the_models_own_likelihoods_say(
    kto_run, monkeypatch
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    home, run_id = kto_run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    outcome = evaluate(run_id, k=1, base_passes=2)
    result = outcome.result
    assert outcome.status == "done", outcome
    signed = result.metrics[0]
    assert signed.name == "feedback_loglik" and signed.optimised
    names = [m.name for m in result.unoptimised]
    assert names[:2] == ["desirable_loglik", "undesirable_loglik"]
    assert signed.noise_floor == 0.0  # likelihoods are deterministic: the passes agree
    assert signed.ci_low is not None and signed.ci_low <= signed.delta <= signed.ci_high

    run_dir = home / "runs" / run_id
    final = run_dir / "final"
    model = AutoModelForCausalLM.from_pretrained(final).eval()
    tokenizer = AutoTokenizer.from_pretrained(final)
    held = [json.loads(line) for line in (run_dir / "holdout.jsonl").read_text().splitlines()]
    assert len(held) == result.tasks_used and {r["label"] for r in held} == {True, False}
    values = [
        (1 if r["label"] else -1) * mean_logp(model, tokenizer, r["prompt"], r["completion"])
        for r in held
    ]
    assert signed.trained_mean == pytest.approx(sum(values) / len(values), abs=2e-3)
