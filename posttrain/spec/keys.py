"""Keys of a spec read from its JSON (as a run directory stores it): the GPU it asks for,
the shape its step time depends on, and what a dry run of it proves. Plain dicts in, so the
index can key finished runs without validating their specs again."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from posttrain.models.catalog import get_preset


def gpu_of(spec: dict[str, Any]) -> str:
    """RunSpec.gpu from a spec's JSON: compute.gpu, else the preset's default."""
    if gpu := (spec.get("compute") or {}).get("gpu"):
        return str(gpu)
    preset = get_preset(str((spec.get("model") or {}).get("name", "")))
    return preset.default_gpu if preset else "H100"


def shape_key(spec: dict[str, Any]) -> dict[str, Any]:
    """RunSpec.shape from a spec's JSON (as stored in a run directory): the backend, the
    model and its weights, the GPU type and count, the algorithm, LoRA or not, the batch and
    the completion length."""
    model, a = spec.get("model") or {}, spec.get("algorithm") or {}
    backend = (spec.get("compute") or {}).get("backend", "local")
    gpu, _, count = gpu_of(spec).partition(":")
    weights = (
        "stand_in" if model.get("stand_in") else "random" if model.get("random_weights") else "real"
    )
    return {
        "backend": backend,
        "model": model.get("name"),
        "weights": weights,
        "gpu": "cpu" if backend == "local" else gpu,
        "gpu_count": 1 if backend == "local" else int(count or 1),
        "kind": a.get("kind"),
        "lora": a.get("lora") is not None,
        "batch": a.get("batch_size"),
        "completion": a.get("max_completion_length"),
    }


def dry_run_key(spec: dict[str, Any]) -> str:
    """RunSpec.dry_run_key from a spec's JSON (as stored in a run directory)."""
    model, algorithm = spec.get("model") or {}, spec.get("algorithm") or {}
    proven = {
        "model": model.get("name"),
        "template": model.get("chat_template_kwargs"),
        "dataset": spec.get("dataset"),
        "reward": spec.get("reward"),
        "kind": algorithm.get("kind"),
        "lora": algorithm.get("lora"),
        "warmstart": algorithm.get("warmstart") is not None,
        "max_prompt_length": algorithm.get("max_prompt_length"),
    }
    canonical = json.dumps(proven, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
