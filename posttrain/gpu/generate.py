"""Sampling completions from a model for traces and evaluation, through the chat template."""

from __future__ import annotations

from typing import Any


def sample(
    model: Any,
    tokenizer: Any,
    prompts: list[list[dict[str, str]]],
    *,
    max_new_tokens: int,
    temperature: float,
    template_kwargs: dict[str, Any] | None = None,
    num_return_sequences: int = 1,
    seed: int | None = None,
    tools: list[Any] | None = None,
) -> list[str]:
    """Completions for chat prompts, `num_return_sequences` each, in prompt order. `tools`:
    each prompt's tool schemas (as it trained with them), or None."""
    import torch

    texts = [
        tokenizer.apply_chat_template(
            p,
            tokenize=False,
            add_generation_prompt=True,
            tools=row_tools or None,
            **(template_kwargs or {}),
        )
        for p, row_tools in zip(prompts, tools or [None] * len(prompts), strict=True)
    ]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    batch = {k: v.to(model.device) for k, v in batch.items()}
    if seed is not None:
        torch.manual_seed(seed)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                num_return_sequences=num_return_sequences,
                pad_token_id=tokenizer.pad_token_id,
            )
    finally:
        model.train(was_training)
    new_tokens = out[:, batch["input_ids"].shape[1] :]
    return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)


def load_arms(run_dir: Any) -> tuple[Any, Any, bool]:
    """The run's base model and tokenizer, and whether its result is a LoRA adapter.

    The base is what training started from (posttrain.gpu.train.start_model: the run's
    warm-start, else the base its launch decided, following resume chains). A LoRA run's
    trained arm is the base with final/ attached; a full fine-tune's is the weights in final/.
    """
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from posttrain.gpu.train import load_tokenizer, start_model
    from posttrain.gpu.trainers import Device
    from posttrain.runs.layout import SPEC
    from posttrain.spec import load_spec

    run_dir = Path(run_dir)
    spec = load_spec(run_dir / SPEC)
    base_path = start_model(run_dir, spec)
    device = Device.detect()
    model = AutoModelForCausalLM.from_pretrained(str(base_path), **device.model_kwargs())
    model.to("cuda" if device.cuda else "cpu")
    return (
        model,
        load_tokenizer(str(base_path)),
        (run_dir / "final" / "adapter_config.json").is_file(),
    )


def generate_job(root: Any, run_id: str, job: dict[str, Any]) -> dict[str, Any]:
    """Base passes (one per seed), then the trained pass, through one code path.

    job: prompts (chat messages), tools (each prompt's tool schemas, or None), k (samples per
    prompt), base_seeds, trained_seed, max_new_tokens, temperature, template_kwargs. Returns
    {"base": [pass][prompt][k], "trained": [prompt][k]}. The base passes run before the
    adapter is attached, so they can never see it (peft wraps the model in place).
    """
    from pathlib import Path

    from posttrain.gpu.reporter import quiet_libraries
    from posttrain.runs.layout import check_run_id

    quiet_libraries()
    run_dir = Path(root) / check_run_id(run_id)
    model, tokenizer, is_adapter = load_arms(run_dir)
    prompts, k = job["prompts"], int(job["k"])
    settings = {
        "max_new_tokens": int(job["max_new_tokens"]),
        "temperature": float(job["temperature"]),
        "template_kwargs": job.get("template_kwargs") or {},
        "num_return_sequences": k,
    }

    def one_pass(m: Any, seed: int) -> list[list[str]]:
        flat = sample(m, tokenizer, prompts, seed=seed, tools=job.get("tools"), **settings)
        return [flat[i * k : (i + 1) * k] for i in range(len(prompts))]

    base = [one_pass(model, seed) for seed in job["base_seeds"]]
    if is_adapter:
        from peft import PeftModel

        trained_model = PeftModel.from_pretrained(model, str(run_dir / "final"))
    else:
        from transformers import AutoModelForCausalLM

        from posttrain.gpu.trainers import Device

        trained_model = AutoModelForCausalLM.from_pretrained(
            str(run_dir / "final"), **Device.detect().model_kwargs()
        ).to(model.device)
    return {"base": base, "trained": one_pass(trained_model, int(job["trained_seed"]))}
