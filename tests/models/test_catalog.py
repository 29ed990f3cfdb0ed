import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.models.calibration import fits
from posttrain.models.catalog import PRESETS, family_of, gpu_prices, parse_gpu


@pytest.mark.parametrize("name", ["Qwen3-0.6B", "Qwen3-8B", "Qwen2.5-0.5B-Instruct"])
def test_preset_shapes_build_and_count_their_parameters(name):
    import torch
    from transformers import AutoModelForCausalLM

    preset = PRESETS[name]
    with torch.device("meta"):  # the real shape, no memory, no download
        model = AutoModelForCausalLM.from_config(preset.config())
    assert sum(p.numel() for p in model.parameters()) == preset.n_params


def test_published_sizes_match():
    billions = {n: round(p.n_params / 1e9, 1) for n, p in PRESETS.items()}
    assert billions["Qwen3-0.6B"] == 0.6 and billions["Qwen3-1.7B"] == 1.7
    assert billions["Qwen3-4B"] == 4.0 and billions["Qwen2.5-7B-Instruct"] == 7.6


def test_gpu_specs_parse_and_unknown_gpus_are_refused():
    assert parse_gpu("h100:4") == ("H100", 4)
    assert parse_gpu("A100-80GB") == ("A100-80GB", 1)
    with pytest.raises(ConfigError, match="unknown GPU type 'B300'"):
        parse_gpu("B300")
    with pytest.raises(ConfigError, match="1 to 8 GPUs"):
        parse_gpu("H100:16")


def test_prices_can_be_overridden_by_a_file(tmp_path, monkeypatch):
    (tmp_path / "prices.json").write_text(json.dumps({"H100": 0.002}))
    monkeypatch.setenv("POSTTRAIN_GPU_PRICES", str(tmp_path / "prices.json"))
    assert gpu_prices()["H100"] == 0.002 and gpu_prices()["T4"] == 0.000164


def test_an_8b_full_fine_tune_does_not_fit_one_h100_but_lora_does():
    preset = PRESETS["Qwen3-8B"]
    assert not fits(preset, "H100", lora=False, completion_tokens=256, batch=32)["fits"]
    assert fits(preset, "H200", lora=True, completion_tokens=256, batch=8)["fits"]


def test_each_preset_is_reported_in_its_own_family_and_smollm2_is_no_qwen():
    families = {name: getattr(family_of(name), "name", None) for name in PRESETS}
    assert families["SmolLM2-135M-Instruct"] == "smollm2"
    assert families["Qwen3-0.6B"] == "qwen3" and families["Qwen2.5-0.5B-Instruct"] == "qwen2.5"
    assert families["tiny-local"] is None  # its own word-level vocabulary
    assert family_of("HuggingFaceTB/SmolLM2-135M-Instruct").name == "smollm2"
