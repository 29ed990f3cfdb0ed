"""Which dtype each model of a run is held in, decided once. The model-loading layer
(posttrain.gpu.models.Device) builds its torch kwargs from it; the memory estimate
(catalog.memory_estimate_gb) counts its bytes by it.

On a GPU with bf16:
- A full fine-tune's weights are fp32: they are the optimizer's master copy, and
  TrainingArguments(bf16=True) autocasts the compute to bf16 (HF Trainer's mixed precision).
  Pure-bf16 weights keep 8 significant bits, so an update below half a unit in the last
  place (0.2-0.4% of the weight) rounds away: one AdamW step at lr 1e-5 moves each weight by
  ~1e-5, and left 84% of the tiny model's layer weights (std 0.02, as Qwen initialises
  them) exactly as they were, measured both by hand and through TRL's SFTTrainer; 0% with
  fp32 masters (tests/gpu/test_precision.py).
- A LoRA run's frozen base is bf16; its adapters are fp32 (peft 0.21's
  `autocast_adapter_dtype=True`, the default), so the trained numbers keep full precision.
- Frozen models are bf16: a full fine-tune's reference (GRPO with beta > 0, DPO), a
  distillation teacher, evaluate's two arms. They are never updated, and their compute runs
  in bf16 either way.
Without bf16 (this machine's CPU) everything is fp32.
"""

from __future__ import annotations

from typing import Literal

Dtype = Literal["float32", "bfloat16"]
# full: the weights a full fine-tune trains | lora: the frozen base LoRA adapts | frozen:
# a model never trained (a reference, a teacher, an evaluation arm)
Role = Literal["full", "lora", "frozen"]

DTYPE_BYTES: dict[Dtype, int] = {"float32": 4, "bfloat16": 2}
# A trained parameter's gradient (fp32, the dtype of its weight) and AdamW's two fp32
# moments. HF's default optimizer on torch >= 2.8 is the fused AdamW: no per-parameter
# temporaries on top.
GRADIENT_AND_ADAM_BYTES = 4 + 8


def trained_role(lora: bool) -> Role:
    """The role of the model a run's trainer loads: LoRA's base, or the weights it trains."""
    return "lora" if lora else "full"


def weights_dtype(role: Role, bf16: bool) -> Dtype:
    """The dtype a model of this role is loaded in, on a device with or without bf16."""
    return "bfloat16" if bf16 and role != "full" else "float32"


def weight_bytes(role: Role, bf16: bool = True) -> int:
    """Bytes a parameter of this role's weights holds."""
    return DTYPE_BYTES[weights_dtype(role, bf16)]


def trained_param_bytes() -> int:
    """Bytes each trained parameter holds: its fp32 weight (a full fine-tune's master copy, a
    LoRA adapter's own), its gradient and Adam's moments."""
    return DTYPE_BYTES["float32"] + GRADIENT_AND_ADAM_BYTES
