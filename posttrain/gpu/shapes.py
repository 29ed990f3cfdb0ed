"""Random-weight models of the real preset shapes, for GPU benchmarks without a download.

The weights are random and the tokenizer is the real one of the preset's family (posttrain's
tokenizers: cache, hub or the embedded vocabulary), so the numbers measure speed and memory
on real token ids, never quality.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from posttrain.models.catalog import Preset
from posttrain.rewards.phonetics import cache_dir

SHAPES_FORMAT = 2  # 2: the real tokenizer


def random_weight_model_path(preset: Preset, seed: int = 0) -> Path:
    """A saved random-weight model of the preset's shape (bf16), built once and cached."""
    path = cache_dir() / "models" / f"{preset.name}-random-v{SHAPES_FORMAT}"
    if (path / "config.json").is_file():
        return path
    import torch
    from transformers import AutoModelForCausalLM

    from posttrain.gpu.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(preset.name).tokenizer
    config = preset.config()
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{preset.name}-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.replace(path)
    except OSError:  # built concurrently by another process
        shutil.rmtree(staging, ignore_errors=True)
    return path
