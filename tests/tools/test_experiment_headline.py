"""An experiment of SFT arms (no reward) is ranked by the kind's headline metric,
reference_nll, lower first, unless sweep.metric names another; and the arms, which share
their base model, generate the base passes once. Real tiny runs on the local backend."""

import pytest

from posttrain.core.errors import ConfigError
from posttrain.runs.context import Context
from posttrain.runs.local import LocalBackend
from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from posttrain.tools.plan import plan
from tests.conftest import kill_leftover_runs, wait_finished
from tests.specs import PAID

SFT = {
    "dataset": {
        "builtin": "rhyme-gym",
        "n_rows": 200,
        "response_column": "response",
        "holdout_share": 0.2,
    },
    "algorithm": {"kind": "sft", "steps": 12, "lora": None, "batch_size": 8, "save_every": 0},
    "sweep": {"algorithm.learning_rate": [3e-3, 1e-6], "seeds": [0]},
}


class CountingLocal(LocalBackend):
    """The real local backend, counting the base passes its generators are asked for."""

    base_passes = 0

    def generator(self, run_dir, gpu, timeout_s):
        real = super().generator(run_dir, gpu, timeout_s)

        def generate(job):
            CountingLocal.base_passes += len(job["base_seeds"])
            return real(job)

        return generate


def test_sft_and_dpo_arms_default_to_their_headline_and_a_named_metric_wins(home):
    assert plan(SFT).experiment.metric.model_dump() == {"name": "reference_nll", "goal": "minimize"}
    dpo = {**PAID, "algorithm": {"kind": "dpo"}, "sweep": {"algorithm.learning_rate": [1e-5, 5e-5]}}
    assert plan(dpo).experiment.metric.name == "preference_accuracy"
    named = {**SFT, "sweep": {**SFT["sweep"], "metric": {"name": "length_words"}}}
    assert plan(named).experiment.metric.name == "length_words"
    grpo = {**PAID, "sweep": {"algorithm.learning_rate": [1e-5, 5e-5]}}
    assert plan(grpo).experiment.metric.model_dump() == {"name": "reward", "goal": "maximize"}


def test_arms_of_kinds_judged_by_different_metrics_must_name_one(home):
    mixed = {**PAID, "sweep": {"algorithm.kind": ["grpo", "sft"]}}
    with pytest.raises(ConfigError, match=r"sweep\.metric"):
        plan(mixed)


@pytest.mark.slow
def test_an_sft_experiment_is_ranked_by_reference_nll_on_one_shared_base(home):
    ctx = Context(backends={"local": CountingLocal()})
    started = launch(SFT, ctx=ctx)
    try:
        for run_id in started.run_ids:
            assert wait_finished(run_id, 300, ctx).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    CountingLocal.base_passes = 0
    out = evaluate(started.group_id, k=1, base_passes=2, max_tasks=20, ctx=ctx)
    compared = out.experiment
    assert (compared.metric, compared.goal) == ("reference_nll", "minimize")
    assert [a.arm for a in compared.arms] == ["learning_rate=0.003", "learning_rate=1e-06"]
    assert compared.arms[0].mean < compared.arms[1].mean  # trained at a real rate: likelier
    assert CountingLocal.base_passes == 2  # once for both arms, not once per arm
    assert any("base passes generated once and shared" in w for w in compared.warnings)
