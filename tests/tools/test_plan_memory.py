"""`plan`'s memory fit counts what the trainer will hold: a full fine-tune's GRPO with a KL
term loads a bf16 reference beside its fp32 masters, and LoRA's adapters by the spec's rank."""

import pytest

from posttrain.models.calibration import fitted
from posttrain.models.catalog import PRESETS, lora_params
from posttrain.tools.plan import plan

FULL_GRPO = {
    "model": "Qwen3-1.7B",
    "algorithm": {
        "kind": "grpo",
        "steps": 10,
        "batch_size": 16,
        "num_generations": 8,
        "max_completion_length": 128,
        "lora": None,
    },
    "compute": {"backend": "modal", "gpu": "A100-40GB", "timeout_s": 3600},
}


def with_algorithm(**algorithm) -> dict:
    return {**FULL_GRPO, "algorithm": {**FULL_GRPO["algorithm"], **algorithm}}


def test_a_full_fine_tunes_kl_reference_is_in_plans_memory_and_tips_it_over_an_a100_40gb(home):
    without = plan(with_algorithm(beta=0.0)).fit
    with_kl = plan(with_algorithm(beta=0.04)).fit
    reference_gb = 2 * PRESETS["Qwen3-1.7B"].n_params * fitted().allocator_factor / 1e9
    assert with_kl["need_gb"] - without["need_gb"] == pytest.approx(reference_gb, abs=0.11)
    assert without["fits"] is True and with_kl["fits"] is False  # 16 B/param + 2 B/param


def test_lora_adapters_are_counted_by_the_specs_rank(home):
    r16 = plan(with_algorithm(lora={"r": 16})).fit["need_gb"]
    r256 = plan(with_algorithm(lora={"r": 256})).fit["need_gb"]
    more = (lora_params(PRESETS["Qwen3-1.7B"], 256) - lora_params(PRESETS["Qwen3-1.7B"], 16)) * 16
    assert r256 - r16 == pytest.approx(more * fitted().allocator_factor / 1e9, abs=0.1)  # ~5 GB
