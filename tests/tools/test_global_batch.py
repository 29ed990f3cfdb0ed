"""The spec's batch is the batch of all GPUs together: plan says each GPU's share, prices a step
by it, checks memory by it, and refuses a batch that does not divide among the GPUs."""

import pytest

from posttrain.core.errors import ConfigError
from posttrain.pricing.cost import MULTI_GPU_OVERHEAD
from posttrain.spec.schema import load_spec
from posttrain.tools.plan import plan

SFT_17B = {
    "model": "Qwen3-1.7B",
    "dataset": {"builtin": "rhyme-gym"},
    "algorithm": {
        "kind": "sft",
        "steps": 1000,
        "batch_size": 64,
        "max_prompt_length": 48,
        "max_completion_length": 2000,
    },
    "compute": {"backend": "modal", "gpu": "H100", "timeout_s": 7200},
}
GRPO_8B = {
    "model": "Qwen3-8B",
    "dataset": {"builtin": "rhyme-gym"},
    "algorithm": {"kind": "grpo", "steps": 50, "batch_size": 64, "num_generations": 8},
    "compute": {"backend": "modal", "gpu": "H100", "timeout_s": 7200},
}


def on(spec: dict, gpu: str, **algorithm) -> dict:
    return {
        **spec,
        "algorithm": {**spec["algorithm"], **algorithm},
        "compute": {**spec["compute"], "gpu": gpu},
    }


@pytest.mark.parametrize("spec", [SFT_17B, GRPO_8B], ids=["sft", "grpo"])
def test_plan_on_four_h100s_says_each_gpus_share_and_prices_a_step_below_one_gpus_whole_batch(
    home, spec
):
    one, four = plan(on(spec, "H100")).cost, plan(on(spec, "H100:4")).cost
    assert four.batch_per_gpu == 16 and one.batch_per_gpu is None
    assert "on 4x H100 (" in four.summary
    assert "s a step of batch 64 in all, 16 a GPU)" in four.summary
    assert "a GPU" not in one.summary
    assert four.step_s < one.step_s
    # the step of a quarter of the batch on one GPU, plus the GPUs' waits for each other
    quarter = plan(on(spec, "H100", batch_size=16)).cost
    assert four.step_s == pytest.approx(quarter.step_s * MULTI_GPU_OVERHEAD, rel=1e-3)


def test_memory_is_checked_for_each_gpus_share_of_the_batch(home):
    one, four = plan(on(SFT_17B, "H100")).fit, plan(on(SFT_17B, "H100:4")).fit
    quarter = plan(on(SFT_17B, "H100", batch_size=16)).fit
    assert four["need_gb"] == quarter["need_gb"] < one["need_gb"]


def test_a_batch_that_does_not_divide_among_the_gpus_is_refused_naming_the_field_and_the_fix():
    with pytest.raises(ConfigError) as refused:
        load_spec(on(SFT_17B, "H100:4", batch_size=30))
    assert str(refused.value) == (
        "spec field 'spec': algorithm.batch_size 30 is the batch of all 4 GPUs together and must "
        "divide among them: use 28 or 32, or a GPU count that divides 30"
    )


def test_a_grpo_batch_is_offered_sizes_that_divide_among_the_gpus_and_keep_whole_groups():
    with pytest.raises(ConfigError, match=r"\(8\): use 48 or 72, or a GPU count that divides 64"):
        load_spec(on(GRPO_8B, "H100:3"))


def test_a_warmstart_batch_that_does_not_divide_among_the_gpus_is_refused_naming_it():
    warm = {"steps": 10, "batch_size": 30}
    with pytest.raises(ConfigError, match=r"algorithm\.warmstart\.batch_size 30 is the batch"):
        load_spec(on(GRPO_8B, "H100:4", warmstart=warm))


def test_on_the_local_backend_the_batch_is_the_one_process_batch():
    spec = load_spec({**on(SFT_17B, "H100:4", batch_size=30), "compute": {"backend": "local"}})
    assert spec.gpu_count == 1 and spec.batch_per_gpu == 30
