"""A group's pass rates pool every pass it has: each training seed's trained pass, and every
base pass (not seed 0's and base pass 1's alone), by the unbiased estimators over the n
samples each task then has. Hand-computed values; then once through evaluate_runs."""

import json

import pytest

from posttrain.data.demo_specs import tool_rows
from posttrain.evals.evaluation import evaluate_runs
from posttrain.evals.pass_rates import pass_rates
from posttrain.spec.schema import load_spec

RIGHT, WRONG = [1.0, 1.0], [0.0, 0.0]  # a task's k=2 samples


def test_two_seeds_that_disagree_pool_into_one_rate_not_the_first_seeds():
    tasks = 10
    seed_0, seed_1 = [RIGHT] * tasks, [WRONG] * tasks
    base = [[WRONG] * tasks] * 3
    rates = pass_rates(base, [seed_0, seed_1], threshold=1.0, k=2)
    # per task n=4 samples, c=2 pass: pass@1 = 2/4, pass@2 = 1 - C(2,2)/C(4,2), pass^2 = 1/6
    assert rates.trained == pytest.approx({"pass@1": 0.5, "pass@2": 5 / 6, "pass^2": 1 / 6})
    assert rates.base == {"pass@1": 0.0, "pass@2": 0.0, "pass^2": 0.0}
    alone = pass_rates(base, [seed_0], threshold=1.0, k=2)  # what seed 0 alone said
    assert alone.trained == {"pass@1": 1.0, "pass@2": 1.0, "pass^2": 1.0}


def test_every_base_pass_counts_not_only_the_first():
    tasks = 5
    base = [[RIGHT] * tasks, [WRONG] * tasks, [WRONG] * tasks]
    rates = pass_rates(base, [[RIGHT] * tasks], threshold=0.5, k=2)
    # n=6, c=2: pass@1 1/3, pass@2 = 1 - C(4,2)/C(6,2) = 9/15, pass^2 = C(2,2)/C(6,2) = 1/15
    assert rates.base == pytest.approx({"pass@1": 1 / 3, "pass@2": 9 / 15, "pass^2": 1 / 15})


def test_a_group_evaluated_end_to_end_reports_the_pooled_rates(tmp_path):
    rows = tool_rows(480)[:300]
    data = tmp_path / "calls.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = load_spec(
        {"model": "tiny-local", "reward": "tool_call",
         "dataset": {"path": str(data), "reference_column": "answer", "holdout_share": 0.2}}
    )  # fmt: skip
    held = _holdout(spec)[:40]
    runs = []
    for seed in (0, 1):
        run = tmp_path / f"run-test-000{seed}"
        run.mkdir()
        (run / "spec.json").write_text(spec.to_json())
        (run / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
        runs.append(run)

    def arm(right: bool):
        def generate(job):  # every base pass wrong; this seed's trained pass right or wrong
            n, k = len(job["prompts"]), job["k"]
            answer = (lambda i: job["references"][i]) if right else (lambda i: "no call")
            return {
                "base": [[["no call"] * k for _ in range(n)] for _ in job["base_seeds"]],
                "trained": [[answer(i)] * k for i in range(n)],
            }

        return generate

    result = evaluate_runs(runs, [arm(True), arm(False)], k=2, max_tasks=40, group_id="grp-x")
    assert result.training_seeds == 2 and result.pass_rates is not None
    assert result.pass_rates.trained == pytest.approx(
        {"pass@1": 0.5, "pass@2": 5 / 6, "pass^2": 1 / 6}
    )
    assert result.pass_rates.base == {"pass@1": 0.0, "pass@2": 0.0, "pass^2": 0.0}


def _holdout(spec):
    from posttrain.algorithms.kinds import algorithm_of

    return algorithm_of(spec).prepare(spec.dataset).holdout
