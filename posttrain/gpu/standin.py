"""Stand-in models: a real preset's family in miniature, for a free dry run on a CPU.

A stand-in of Qwen3-4B is a Qwen3ForCausalLM with the real vocabulary (151,936 embedding
rows), q/k norms, tied embeddings as the 4B has, and the real tokenizer and chat template,
but 2 layers of width 64 and random weights (~10M parameters). It exercises everything that
depends on the family and the vocabulary: the template, token ids, EOS and padding, the
thinking block, LoRA's target module names under `all-linear`, checkpoint and resume. It
proves nothing about quality, speed or memory on a GPU, and every report says so.

Nothing here downloads or loads a real checkpoint's weights.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from posttrain.models.standin_shape import MOE_ARCH, STAND_IN_ARCH, StandIn, stand_in_for
from posttrain.rewards.phonetics import cache_dir

STAND_IN_FORMAT = 1  # bump when STAND_IN_ARCH or MOE_ARCH change, so cached stand-ins are rebuilt


def stand_in_path(name: str, seed: int = 0) -> Path:
    """A saved stand-in (fp32 weights, config, the real tokenizer), built once and cached;
    another `seed` gives other random weights of the same shape (a distillation's teacher)."""
    shape = stand_in_for(name)
    slug = re.sub(r"[^A-Za-z0-9.]+", "_", shape.of.strip("/"))[-80:]
    seeded = f"-s{seed}" if seed else ""
    path = cache_dir() / "models" / f"standin-{slug}{seeded}-v{STAND_IN_FORMAT}"
    if (path / "config.json").is_file() and (path / "tokenizer.json").is_file():
        return path
    from posttrain.gpu.tokenizers import load_tokenizer

    loaded = load_tokenizer(name)
    model = build(shape, loaded.tokenizer, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=".standin-"))
    model.save_pretrained(staging)
    loaded.tokenizer.save_pretrained(staging)
    (staging / "posttrain.json").write_text(
        json.dumps({"stand_in": asdict(shape), "tokenizer_source": loaded.source})
    )
    try:
        os.replace(staging, path)
    except OSError:  # built concurrently by another process
        shutil.rmtree(staging, ignore_errors=True)
    return path


def build(shape: StandIn, tokenizer, seed: int = 0):
    """A randomly initialised model of the stand-in's shape."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = MOE_ARCH if shape.model_type == "qwen3_moe" else {}
    config = AutoConfig.for_model(
        shape.model_type,
        vocab_size=shape.vocab_size,
        tie_word_embeddings=shape.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **STAND_IN_ARCH,
        **extra,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Qwen's generation config stops at <|im_end|> or <|endoftext|>.
    endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, endoftext]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
