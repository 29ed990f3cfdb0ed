"""Which model a run loads, and how: the folder (the tiny model, a stand-in, random weights
of a real shape, a preset, real weights converted from a GGUF, an earlier run's output), its
tokenizer, and the device's precision. The bottom of gpu/: generation, training and the dry
run build on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.paths import expand
from posttrain.models.precision import Dtype, Role, weights_dtype
from posttrain.runs.layout import RUN_META, check_run_id, read_json
from posttrain.spec.schema import RunSpec


@dataclass
class Device:
    cuda: bool
    bf16: bool
    name: str

    @classmethod
    def detect(cls) -> Device:
        import torch

        if torch.cuda.is_available():
            return cls(True, torch.cuda.is_bf16_supported(), torch.cuda.get_device_name(0))
        # its nice value said: a run beside busy processes is slow by design (core.priority)
        return cls(False, False, f"cpu, {torch.get_num_threads()} thread(s), nice {os.nice(0)}")

    def trainer_kwargs(self) -> dict[str, Any]:
        # TRL 1.16 defaults to bf16, which fails on a CPU: say so explicitly either way. With
        # bf16 the trainer autocasts the compute; the weights keep their loaded dtype.
        return {"use_cpu": not self.cuda, "bf16": self.bf16, "fp16": False}

    def dtype(self, role: Role) -> Dtype:
        """The dtype a model of this role loads in here (posttrain.models.precision decides)."""
        return weights_dtype(role, self.bf16)

    def model_kwargs(self, role: Role) -> dict[str, Any]:
        """from_pretrained's kwargs for a model of this role: a full fine-tune's fp32 master
        weights, LoRA's bf16 base, a frozen model's bf16 (all fp32 without bf16)."""
        import torch

        return {"dtype": getattr(torch, self.dtype(role))}

    def hold_reference_frozen(self, trainer: Any) -> None:
        """TRL builds a full fine-tune's reference model (GRPO with beta > 0, DPO) from the
        policy's model_init_kwargs, so in fp32: cast it to the frozen dtype, as the memory
        estimate counts it. LoRA has none (its reference is the base, adapter off)."""
        reference = getattr(trainer, "ref_model", None)
        if reference is not None:
            import torch

            reference.to(getattr(torch, self.dtype("frozen")))


def resolve_model(spec: RunSpec) -> str:
    """A local folder (or hub id) that from_pretrained can load for the spec's model."""
    preset = spec.model.preset
    if preset is not None and preset.name == "tiny-local":
        from posttrain.gpu.tiny import tiny_model_path

        return str(tiny_model_path())
    if spec.model.stand_in:
        from posttrain.gpu.standin import stand_in_path

        return str(stand_in_path(spec.model.name))
    if preset is not None and spec.model.random_weights:
        from posttrain.gpu.shapes import random_weight_model_path

        return str(random_weight_model_path(preset))
    from posttrain.gpu.weights import local_folder

    if converted := local_folder(spec.model.name):  # packaged weights, or a .gguf path
        return str(converted)
    if preset is not None:
        return preset.hf_repo or preset.name
    return str(expand(spec.model.name))


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def base_model(run_dir: Path, spec: RunSpec) -> str:
    """What this run's training starts from, as its launch decided (run.json `base`, which
    follows resume chains): a folder of an earlier run, or the spec's own model."""
    base = read_json(run_dir / RUN_META).get("base") or {}
    if base.get("run_id"):
        return str(run_dir.parent / check_run_id(base["run_id"]) / (base.get("folder") or "final"))
    return resolve_model(spec)


def start_model(run_dir: Path, spec: RunSpec) -> str:
    """What the main phase starts from, and so evaluate's base arm: this run's own warm-start
    when it had one, else its base model."""
    warm = run_dir / "warmstart"
    return str(warm) if warm.is_dir() else base_model(run_dir, spec)
