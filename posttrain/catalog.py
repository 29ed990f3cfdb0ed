"""Model presets, the GPU price table, and whether a model fits a GPU.

Presets carry the architecture numbers of the real checkpoints, so a random-weight model of
the real shape can be built for GPU benchmarks without a download (`Preset.config()`).
`tiny-local` is the Qwen3-shaped model built on this machine (posttrain.gpu.tiny).

Prices are Modal's on-demand GPU prices in $/s, dated; override them with a JSON file named
by $POSTTRAIN_GPU_PRICES ({"H100": 0.0012, ...}).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError

PRICES_AS_OF = "2026-11"
GPU_PRICE_USD_PER_S: dict[str, float] = {
    "H200": 0.001261,
    "H100": 0.001097,
    "A100-80GB": 0.000694,
    "A100-40GB": 0.000583,
    "L40S": 0.000542,
    "A10": 0.000306,
    "L4": 0.000222,
    "T4": 0.000164,
}
GPU_MEMORY_GB: dict[str, int] = {
    "H200": 141,
    "H100": 80,
    "A100-80GB": 80,
    "A100-40GB": 40,
    "L40S": 48,
    "A10": 24,
    "L4": 24,
    "T4": 16,
}

# Dense bf16 tensor TFLOP/s and HBM GB/s from the vendors' data sheets: the cost estimate's
# step-time model divides work by these.
GPU_PERF: dict[str, tuple[float, float]] = {
    "H200": (989, 4800),
    "H100": (989, 3350),
    "A100-80GB": (312, 2039),
    "A100-40GB": (312, 1555),
    "L40S": (362, 864),
    "A10": (125, 600),
    "L4": (121, 300),
    "T4": (65, 320),
}


def gpu_prices() -> dict[str, float]:
    """The price table, with $POSTTRAIN_GPU_PRICES's overrides applied."""
    prices = dict(GPU_PRICE_USD_PER_S)
    if path := os.environ.get("POSTTRAIN_GPU_PRICES"):
        try:
            overrides = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"POSTTRAIN_GPU_PRICES={path}: cannot read a JSON object of $/s prices ({exc})"
            ) from None
        if not isinstance(overrides, dict) or not all(
            isinstance(v, int | float) and v >= 0 for v in overrides.values()
        ):
            raise ConfigError(f"POSTTRAIN_GPU_PRICES={path}: expected {{'GPU': dollars_per_s}}")
        prices.update({str(k): float(v) for k, v in overrides.items()})
    return prices


def parse_gpu(gpu: str) -> tuple[str, int]:
    """'H100:4' -> ('H100', 4); 'a100-80gb' -> ('A100-80GB', 1). Unknown types are an error."""
    name, _, count = gpu.partition(":")
    name = name.strip().upper()
    if name not in gpu_prices():
        raise ConfigError(
            f"unknown GPU type '{gpu}'; use one of {sorted(gpu_prices())}, optionally with a "
            f"count such as 'H100:2'"
        )
    try:
        n = int(count) if count else 1
    except ValueError:
        raise ConfigError(f"GPU count in '{gpu}' is not a whole number (e.g. 'H100:2')") from None
    if not 1 <= n <= 8:
        raise ConfigError(f"GPU count {n} in '{gpu}': one container holds 1 to 8 GPUs")
    return name, n


@dataclass(frozen=True)
class Preset:
    name: str
    hf_repo: str | None  # where the real weights live (None: built locally)
    model_type: str  # transformers model_type: qwen3 or qwen2
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    default_gpu: str
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def n_params(self) -> int:
        """Parameter count from the shape (embeddings, attention, MLP, norms)."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h
        if self.model_type == "qwen2":
            attention += q + 2 * kv  # q/k/v biases
        else:
            attention += 2 * self.head_dim  # q/k RMS norms
        layer = attention + 3 * h * self.intermediate_size + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * layer + embeddings + h

    def config(self) -> Any:
        """A transformers config of the real shape (random weights come from it)."""
        from transformers import AutoConfig

        kwargs = {
            k: getattr(self, k)
            for k in (
                "hidden_size",
                "num_hidden_layers",
                "intermediate_size",
                "num_attention_heads",
                "num_key_value_heads",
                "vocab_size",
                "tie_word_embeddings",
            )
        }
        if self.model_type == "qwen3":
            kwargs["head_dim"] = self.head_dim
        return AutoConfig.for_model(self.model_type, **kwargs)


def _qwen3(name: str, h: int, layers: int, inter: int, heads: int, tie: bool, gpu: str) -> Preset:
    return Preset(
        name=name,
        hf_repo=f"Qwen/{name}",
        model_type="qwen3",
        hidden_size=h,
        num_hidden_layers=layers,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=tie,
        default_gpu=gpu,
        chat_template_kwargs={"enable_thinking": False},
    )


def _qwen25(name: str, h: int, layers: int, inter: int, heads: int, kv: int, gpu: str) -> Preset:
    big = name.startswith("Qwen2.5-7B")
    return Preset(
        name=name,
        hf_repo=f"Qwen/{name}",
        model_type="qwen2",
        hidden_size=h,
        num_hidden_layers=layers,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=h // heads,
        vocab_size=152064 if big else 151936,
        tie_word_embeddings=not big,
        default_gpu=gpu,
    )


TINY_LOCAL = Preset(
    name="tiny-local",
    hf_repo=None,
    model_type="qwen3",
    hidden_size=128,
    num_hidden_layers=4,
    intermediate_size=256,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    vocab_size=210,
    tie_word_embeddings=True,
    default_gpu="T4",
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        TINY_LOCAL,
        _qwen3("Qwen3-0.6B", 1024, 28, 3072, 16, True, "L40S"),
        _qwen3("Qwen3-1.7B", 2048, 28, 6144, 16, True, "A100-40GB"),
        _qwen3("Qwen3-4B", 2560, 36, 9728, 32, True, "A100-80GB"),
        _qwen3("Qwen3-8B", 4096, 36, 12288, 32, False, "H100"),
        _qwen25("Qwen2.5-0.5B-Instruct", 896, 24, 4864, 14, 2, "L40S"),
        _qwen25("Qwen2.5-1.5B-Instruct", 1536, 28, 8960, 12, 2, "A100-40GB"),
        _qwen25("Qwen2.5-3B-Instruct", 2048, 36, 11008, 16, 2, "A100-80GB"),
        _qwen25("Qwen2.5-7B-Instruct", 3584, 28, 18944, 28, 4, "H100"),
    )
}


def get_preset(name: str) -> Preset | None:
    """A preset by name, case-insensitive; also accepts the 'Qwen/...' repo id."""
    key = name.removeprefix("Qwen/").lower()
    return next((p for p in PRESETS.values() if p.name.lower() == key), None)


def memory_estimate_gb(n_params: int, lora: bool, completion_tokens: int, batch: int) -> float:
    """Rough peak GPU memory for training: weights, optimizer state, activations, KV cache.

    bf16 weights are 2 bytes/param. Full fine-tuning adds fp32 master weights and Adam moments
    (12 bytes/param) and gradients (2); LoRA trains ~1% of that. Activations and the KV cache
    grow with batch x tokens; 20% on top covers the allocator and CUDA context.
    """
    weights = 2 * n_params
    training = (0.01 if lora else 1.0) * 14 * n_params
    activations = batch * completion_tokens * (n_params**0.5) * 64  # ~hidden x layers x 64 bytes
    return 1.2 * (weights + training + activations) / 1e9


def fits(preset: Preset, gpu: str, lora: bool, completion_tokens: int, batch: int) -> dict:
    """Whether a preset fits a GPU spec ('H100:2' shares nothing: each GPU holds a replica)."""
    name, _ = parse_gpu(gpu)
    need = memory_estimate_gb(preset.n_params, lora, completion_tokens, batch)
    have = GPU_MEMORY_GB.get(name, 0)
    return {"gpu": name, "need_gb": round(need, 1), "have_gb": have, "fits": need <= have}
