"""An SFT spec needs no reward: evaluate then measures the held-out references' likelihood,
as plan says it will; no reward and no references is a clear error before any sampling."""

import json

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.data.dataset import prepare
from posttrain.evals.evaluation import evaluate_run
from posttrain.spec.schema import load_spec
from posttrain.tools.plan import plan

SPEC = {
    "dataset": {
        "builtin": "rhyme-gym",
        "n_rows": 300,
        "response_column": "response",
        "holdout_share": 0.2,
    },
    "algorithm": {"kind": "sft", "steps": 10},
}


def run_dir(tmp_path, spec: dict) -> tuple:
    run = tmp_path / "run-test-0001"
    run.mkdir()
    validated = load_spec(spec)
    (run / "spec.json").write_text(validated.to_json())
    holdout = prepare(validated.dataset, "targets").holdout
    (run / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in holdout))
    return run, holdout


def test_an_sft_spec_without_a_reward_plans_as_such_and_says_what_evaluate_measures(home):
    result = plan(SPEC)
    assert result.spec["reward"] is None and result.defaults["reward"] is None
    assert any("reference_nll" in w for w in result.warnings)
    grpo = plan({**SPEC, "algorithm": {"kind": "grpo"}})
    assert grpo.defaults["reward"] == {"name": "rhyme_relevance", "params": {}}  # filled, said
    assert any("default 'rhyme_relevance'" in w for w in grpo.warnings)


def test_evaluate_without_a_reward_reports_the_references_likelihood(tmp_path):
    run, _ = run_dir(tmp_path, SPEC)

    def generate(job):  # the trained arm gives every reference a lower NLL than the base
        n, k = len(job["prompts"]), job["k"]
        base = [[[f"answer {i}"] * k for i in range(n)] for _ in job["base_seeds"]]
        return {
            "base": base,
            "trained": [[f"answer {i}"] * k for i in range(n)],
            "nll": {"base": [2.0 + 0.01 * i for i in range(n)], "trained": [1.0] * n},
        }

    result = evaluate_run(run, generate, k=2, max_tasks=40)
    headline = result.metrics[0]
    assert [m.name for m in result.metrics] == [algorithm_of("sft").headline_metric]  # its unit's
    assert headline.optimised and not headline.higher_is_better and headline.delta < -0.9
    assert result.pass_rates is None and result.examples[0]["base_reward"] is None
    assert result.verdict.startswith("unproven: improved")  # under 50 tasks, one seed
    assert [m.name for m in result.unoptimised] == ["length_words"]


def test_no_reward_and_no_references_is_refused_before_anything_is_sampled(tmp_path):
    spec = {**SPEC, "dataset": {**SPEC["dataset"], "reference_column": None}}
    run, holdout = run_dir(tmp_path, spec)
    for row in holdout:
        row["reference"] = None
    (run / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in holdout))

    def generate(job):
        raise AssertionError("nothing may be sampled")

    with pytest.raises(ConfigError, match="names no reward and fewer than 5 held-out tasks"):
        evaluate_run(run, generate, k=2, max_tasks=40)
