"""Answer length and an episode's turns and tool calls are described, never judged: their
base and trained means are reported, with no verdict ("improved", "worse") and no place
among the regressions that qualify a headline. An agent that ends its episodes in fewer turns
has not regressed, nor improved; only the reward and success say that."""

import json

from posttrain.algorithms.kinds import algorithm_of
from posttrain.evals.evaluation import evaluate_run
from posttrain.evals.metrics import DESCRIBED_VERDICT
from posttrain.spec.schema import load_spec


def episodes(reward: float, turns: int, calls: int):
    def one():
        episode = {"turn_count": turns, "tool_calls": calls, "tool_errors": 0, "turns": []}
        return {"reward": reward, "episode": episode}

    return one


def test_fewer_turns_and_tool_calls_are_described_not_called_worse(tmp_path):
    dataset = {"builtin": "rhyme-gym", "n_rows": 300, "holdout_share": 0.2}
    spec = load_spec({"model": "tiny-local", "environment": "calculator", "dataset": dataset})
    run = tmp_path / "run-test-0001"
    run.mkdir()
    (run / "spec.json").write_text(spec.to_json())
    held = algorithm_of(spec).prepare(spec.dataset).holdout
    (run / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    base, trained = episodes(1.0, turns=6, calls=5), episodes(1.0, turns=2, calls=1)

    def generate(job):  # the same reward; the trained agent is done in far fewer steps
        n, k = len(job["rows"]), job["k"]
        return {
            "base": [[[base() for _ in range(k)] for _ in range(n)] for _ in job["base_seeds"]],
            "trained": [[trained() for _ in range(k)] for _ in range(n)],
        }

    result = evaluate_run(run, generate, k=2, max_tasks=40)
    seen = {m.name: m for m in result.unoptimised}
    for name, (before, after) in {"turns": (6.0, 2.0), "tool_calls": (5.0, 1.0)}.items():
        assert (seen[name].base_mean, seen[name].trained_mean) == (before, after)
        assert seen[name].verdict == DESCRIBED_VERDICT and seen[name].degenerate is None
    assert "worse beyond noise" not in result.verdict  # no regression of a described metric
    assert seen["tool_errors"].verdict != DESCRIBED_VERDICT  # fewer errors is judged
