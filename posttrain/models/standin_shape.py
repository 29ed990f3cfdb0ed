"""The stand-in of a model: what a tiny random-weight model keeps of the real one (its
family, architecture type, vocabulary rows and tied embeddings), decided from the preset,
the folder's config.json or the name. Facts only, for the spec's validation and the dry
run's reports: posttrain.gpu.standin builds and caches the model itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from posttrain.core.errors import ConfigError
from posttrain.core.paths import expand
from posttrain.models.catalog import QWEN3, STAND_IN_FAMILIES, family_of, get_preset, size_b

STAND_IN_ARCH = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
MOE_ARCH = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}
QWEN_VOCAB_ROWS = 151936  # embedding rows of every Qwen3 and the small Qwen2.5 (padding)
QWEN25_LARGE_VOCAB_ROWS = 152064  # Qwen2.5 7B and larger


@dataclass(frozen=True)
class StandIn:
    """What a stand-in keeps of the real model."""

    of: str  # the model it stands in for
    family: str
    model_type: str  # qwen3, qwen3_moe or qwen2 (q/k/v biases)
    vocab_size: int
    tie_word_embeddings: bool
    basis: str  # where these facts came from

    @property
    def described(self) -> str:
        tied = "tied" if self.tie_word_embeddings else "untied"
        return (
            f"stand-in of {self.of}: {self.model_type}, {STAND_IN_ARCH['num_hidden_layers']} "
            f"layers, hidden {STAND_IN_ARCH['hidden_size']}, {self.vocab_size:,}-row "
            f"vocabulary, {tied} embeddings, random weights ({self.basis})"
        )


def stand_in_for(name: str) -> StandIn:
    """The stand-in shape for a preset, a Qwen-family hub id or a local Qwen model folder."""
    family = family_of(name)
    if family is None:
        raise ConfigError(
            f"model '{name}' has no stand-in: a dry run needs a model of the "
            f"{STAND_IN_FAMILIES} families (a preset, a hub id of those families, or a local "
            f"folder whose config.json says model_type qwen3 or qwen2), so that its real "
            f"tokenizer and chat template can be used; dry-run with such a model, or run "
            f"`posttrain smoke --backend modal` to try this model itself on a GPU"
        )
    preset = get_preset(name)
    if preset is not None:
        return StandIn(
            preset.name,
            family.name,
            preset.model_type,
            preset.vocab_size,
            preset.tie_word_embeddings,
            "from the preset",
        )
    config = expand(name) / "config.json"
    if config.is_file():
        real = json.loads(config.read_text(encoding="utf-8"))
        return StandIn(
            name,
            family.name,
            str(real.get("model_type")),
            int(real.get("vocab_size") or QWEN_VOCAB_ROWS),
            bool(real.get("tie_word_embeddings", False)),
            "from the folder's config.json",
        )
    size = size_b(name)
    moe = bool(re.search(r"-a\d+(\.\d+)?b", name, re.I))
    if family.model_type == "qwen2":
        large = size is not None and size >= 7
        vocab, tied = (QWEN25_LARGE_VOCAB_ROWS, False) if large else (QWEN_VOCAB_ROWS, True)
    else:
        vocab, tied = QWEN_VOCAB_ROWS, not moe and (size is None or size < 8)
    basis = f"inferred from the name ({size:g}B)" if size else "inferred from the name"
    model_type = "qwen3_moe" if moe and family.model_type == QWEN3.model_type else family.model_type
    return StandIn(name, family.name, model_type, vocab, tied, basis)
