"""Which dtype each model is held in (posttrain.models.precision), read by every trainer.

A full fine-tune keeps fp32 master weights and lets the trainer's bf16 autocast do the
compute: pure-bf16 weights lose most updates of an lr-1e-5 AdamW step (bf16 keeps 8
significant bits; the step moves a weight by ~lr). LoRA keeps its frozen base in bf16 and its
adapters in fp32. Frozen models (a full fine-tune's reference, a teacher, evaluate's arms) are
bf16. Checked here without a GPU: the kwargs a CUDA run gets, and the real trainers on the
CPU with bf16 autocast on (accelerate's CPU mixed precision), which is the GPU's code path.
"""

from __future__ import annotations

import pytest
import torch

from posttrain.algorithms.kinds import algorithm_of
from posttrain.gpu.models import Device, load_tokenizer, resolve_model
from posttrain.spec.schema import load_spec

pytestmark = pytest.mark.slow

H100 = Device(cuda=True, bf16=True, name="NVIDIA H100 80GB HBM3")
CPU_AUTOCAST = Device(cuda=False, bf16=True, name="cpu with bf16 autocast")  # the GPU's path
LR = 1e-5


def tiny_spec(kind: str = "sft", lora: bool = False, **algorithm) -> object:
    settings = {
        "kind": kind,
        "steps": 1,
        "lora": {"r": 4} if lora else None,
        "learning_rate": LR,
        "lr_scheduler": "constant",
        "batch_size": 4,
        "max_completion_length": 16,
        "save_every": 0,
        "traces": {"every": 0, "samples": 0},
        **algorithm,
    }
    if kind == "grpo":
        settings.update(num_generations=4)
    return load_spec(
        {
            "dataset": {"builtin": "rhyme-gym", "n_rows": 16, "response_column": "response"},
            "reward": "rhyme",
            "algorithm": settings,
        }
    )


def job_for(spec, device: Device, out, rows=None):
    from posttrain.gpu.reporter import Reporter
    from posttrain.gpu.trainers import Job
    from posttrain.rewards.registry import get_reward

    path = resolve_model(spec)
    rows = rows if rows is not None else algorithm_of(spec).prepare(spec.dataset).train
    reward = get_reward(spec.reward.name, spec.reward.params) if spec.reward else None
    return Job(spec, path, load_tokenizer(path), rows, out, Reporter(out), device, reward)


def layer_weights(model) -> list[torch.Tensor]:
    """The decoder blocks' matrices: every one of their entries gets a gradient each step
    (an embedding row does only where its token appears)."""
    return [
        p.detach().float().clone()
        for n, p in model.named_parameters()
        if ".layers." in n and p.dim() == 2
    ]


def share_unchanged(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    same = sum(int((a == b).sum()) for a, b in zip(before, after, strict=True))
    return same / sum(t.numel() for t in before)


def test_a_cuda_run_with_bf16_loads_a_full_fine_tune_in_fp32_and_lora_and_frozen_models_in_bf16():
    assert H100.model_kwargs("full") == {"dtype": torch.float32}
    assert H100.model_kwargs("lora") == {"dtype": torch.bfloat16}
    assert H100.model_kwargs("frozen") == {"dtype": torch.bfloat16}
    assert H100.trainer_kwargs() == {"use_cpu": False, "bf16": True, "fp16": False}  # autocast
    cpu = Device(cuda=False, bf16=False, name="cpu")
    assert {cpu.dtype(r) for r in ("full", "lora", "frozen")} == {"float32"}


def test_every_trainers_config_on_a_bf16_gpu_loads_full_fine_tunes_in_fp32(tmp_path):
    from posttrain.gpu.trainers import common_config

    for kind in ("sft", "grpo"):
        full = common_config(job_for(tiny_spec(kind), H100, tmp_path), 1, save=False)
        lora = common_config(job_for(tiny_spec(kind, lora=True), H100, tmp_path), 1, save=False)
        assert full["model_init_kwargs"] == {"dtype": torch.float32} and full["bf16"] is True
        assert lora["model_init_kwargs"] == {"dtype": torch.bfloat16} and lora["bf16"] is True


def test_an_adamw_step_at_lr_1e_5_leaves_most_bf16_weights_as_they_were_and_moves_fp32_masters():
    """The optimizer step HF's Trainer takes (AdamW, no weight decay), on the tiny model's
    weights loaded as a CUDA full fine-tune now loads them and as it did before (pure bf16)."""
    from transformers import AutoModelForCausalLM

    from posttrain.gpu.tiny import tiny_model_path

    ids = torch.randint(0, 200, (4, 32), generator=torch.Generator().manual_seed(0))
    unchanged = {}
    for label, kwargs in (
        ("fp32 masters", H100.model_kwargs("full")),
        ("pure bf16", {"dtype": torch.bfloat16}),
    ):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model_path()), **kwargs)
        before = layer_weights(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # the trainer's bf16=True
            model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        unchanged[label] = share_unchanged(before, layer_weights(model))
    assert unchanged["fp32 masters"] < 0.01
    assert unchanged["pure bf16"] > 0.75  # 84% measured (|w| ~ 0.02: a bf16 step there is 1e-4)


def test_a_full_fine_tune_through_trls_sft_trainer_updates_its_fp32_masters_under_bf16_autocast(
    tmp_path,
):
    from posttrain.gpu.trainers import SftSettings, sft_trainer

    job = job_for(tiny_spec("sft"), CPU_AUTOCAST, tmp_path)
    settings = SftSettings("train", 1, LR, 4, "constant", lora=False)
    trainer = sft_trainer(job, settings, proof=False)
    assert trainer.accelerator.mixed_precision == "bf16"
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    before = layer_weights(trainer.model)
    trainer.train()
    assert share_unchanged(before, layer_weights(trainer.model)) < 0.01
    job.reporter.close()


def test_lora_keeps_a_bf16_frozen_base_and_trains_fp32_adapters(tmp_path):
    from posttrain.gpu.trainers import SftSettings, sft_trainer

    job = job_for(tiny_spec("sft", lora=True), CPU_AUTOCAST, tmp_path)
    trainer = sft_trainer(job, SftSettings("train", 1, LR, 4, "constant", lora=True), proof=False)
    params = dict(trainer.model.named_parameters())
    trained = {p.dtype for p in params.values() if p.requires_grad}
    frozen = {p.dtype for n, p in params.items() if not p.requires_grad and ".layers." in n}
    assert trained == {torch.float32} and frozen == {torch.bfloat16}  # peft's default upcast
    job.reporter.close()


def test_a_full_fine_tunes_grpo_reference_is_held_in_bf16_beside_fp32_masters(tmp_path):
    from posttrain.gpu.trainers import run_grpo

    job = job_for(tiny_spec("grpo", beta=0.04), CPU_AUTOCAST, tmp_path)
    trainer = run_grpo(job, proof=False)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}
    job.reporter.close()


def dpo_job(tmp_path, device: Device, **algorithm):
    """A job for a full-fine-tune DPO run of the tiny model on 12 preference pairs."""
    from posttrain.data import preference_gym
    from posttrain.data.dataset import prepare

    data = preference_gym.write(tmp_path, n=12)
    settings = {
        "kind": "dpo",
        "steps": 1,
        "lora": None,
        "batch_size": 2,
        "max_prompt_length": 64,
        "max_completion_length": 32,
        "save_every": 0,
        "traces": {"every": 0, "samples": 0},
        **algorithm,
    }
    spec = load_spec({"dataset": {"path": str(data)}, "algorithm": settings})
    return job_for(spec, device, tmp_path / "run", prepare(spec.dataset, "pairs").train)


def test_a_full_fine_tunes_dpo_reference_is_held_in_bf16(tmp_path):
    from posttrain.gpu.dpo_trainer import dpo_trainer

    job = dpo_job(tmp_path, CPU_AUTOCAST)
    trainer = dpo_trainer(job, proof=False)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}
    job.reporter.close()
