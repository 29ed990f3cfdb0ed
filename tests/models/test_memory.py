"""A training step's memory counted in the dtype each model is held in (models.precision): a
full fine-tune's fp32 masters, gradients and Adam moments, LoRA's bf16 base and fp32
adapters, a bf16 reference and teacher; and the fitted allocator factor still reproducing the
measured peak it was fitted to."""

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.models.calibration import MEASURED_TERMS, MEASUREMENTS, fits, fitted
from posttrain.models.catalog import PRESETS, holds_reference, lora_params, memory_estimate_gb

QWEN3_4B = PRESETS["Qwen3-4B"]
GB = 1e9


def state_gb(kind: str = "grpo", lora: bool = False, **more) -> float:
    """The model state alone: no tokens, so no activations or KV cache; factor 1."""
    return memory_estimate_gb(QWEN3_4B, lora, 0, 0, 0, algorithm_of(kind).step, 1.0, **more)


def test_the_fitted_factor_reproduces_every_measured_peak_with_checkpointing():
    measured = [m for m in MEASUREMENTS if m.peak_memory_gb and m.gradient_checkpointing]
    assert measured  # the SFT peak: Qwen3-1.7B LoRA, 8 x 2,048 tokens, 8.4 GB on an H200
    for m in measured:
        fit = fits(
            PRESETS[m.model],
            m.gpu,
            lora=True,
            completion_tokens=m.completion_tokens,
            batch=m.batch,
            prompt_tokens=m.prompt_tokens,
            terms=MEASURED_TERMS[m.what],
        )
        assert fit["need_gb"] == pytest.approx(m.peak_memory_gb, abs=0.05)
    assert 1.0 < fitted().allocator_factor < 1.5  # the allocator's overhead, not a fudge


def test_a_full_fine_tune_holds_16_bytes_a_parameter_fp32_masters_gradients_and_adam():
    n = QWEN3_4B.n_params
    assert state_gb(lora=False) == pytest.approx((4 + 4 + 8) * n / GB)


def test_lora_holds_a_bf16_base_and_fp32_adapters_with_their_gradients_and_adam():
    n, adapters = QWEN3_4B.n_params, lora_params(QWEN3_4B, 16)
    assert state_gb(lora=True) == pytest.approx((2 * n + 16 * adapters) / GB)
    assert 0.005 < adapters / n < 0.01  # r16 on every linear layer of the 4B: 33M
    assert lora_params(QWEN3_4B, 64) == 4 * adapters


def test_lora_params_count_the_adapters_peft_builds_on_the_real_shape():
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    preset = PRESETS["Qwen3-0.6B"]
    with torch.device("meta"):
        model = get_peft_model(
            AutoModelForCausalLM.from_config(preset.config()),
            LoraConfig(r=16, target_modules="all-linear"),
        )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == lora_params(preset, 16)


def test_a_full_fine_tunes_kl_term_and_its_dpo_add_a_bf16_reference_and_lora_adds_none():
    n = QWEN3_4B.n_params
    assert state_gb("grpo", beta=0.04) - state_gb("grpo", beta=0.0) == pytest.approx(2 * n / GB)
    assert state_gb("dpo") - state_gb("sft") == pytest.approx(2 * n / GB)
    assert state_gb("grpo", lora=True, beta=0.04) == state_gb("grpo", lora=True, beta=0.0)
    assert state_gb("dpo", lora=True) == state_gb("sft", lora=True)
    grpo, distill = algorithm_of("grpo").step, algorithm_of("distill").step
    assert holds_reference(grpo, False, 0.04) and not holds_reference(distill, False, 0.04)
    assert holds_reference(algorithm_of("kto").step, False, 0.0)  # KTO's reference, as DPO's


def test_a_distillation_teacher_is_counted_in_bf16():
    teacher = PRESETS["Qwen3-8B"].n_params
    with_teacher = state_gb("distill", lora=True, teacher_params=teacher)
    assert with_teacher - state_gb("distill", lora=True) == pytest.approx(2 * teacher / GB)


def test_a_containers_memory_grows_with_its_gpus_processes_and_its_price_counts_it():
    """Each GPU's trainer process loads the weights into host memory: H100:4 asks for more
    than H100, and its price a second is its GPUs, cores and GiB at the table's rates."""
    from posttrain.models.catalog import CPU_CORE_USD_PER_S, MEMORY_GIB_USD_PER_S, PRESETS
    from posttrain.models.container import container_for_model

    one = container_for_model("H100", 1, "Qwen3-4B")
    four = container_for_model("H100", 4, "Qwen3-4B")
    weights_gib = 2 * PRESETS["Qwen3-4B"].n_params / 2**30
    assert one.memory_gib == 46 and four.memory_gib >= one.memory_gib + 3 * 2 * weights_gib
    assert (one.cores, four.cores) == (4, 16)
    assert four.usd_per_s == pytest.approx(
        4 * 0.001097 + 16 * CPU_CORE_USD_PER_S + four.memory_gib * MEMORY_GIB_USD_PER_S
    )
