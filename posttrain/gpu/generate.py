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


def reference_nll(
    model: Any,
    tokenizer: Any,
    prompts: list[Any],
    references: list[str | None],
    *,
    template_kwargs: dict[str, Any] | None = None,
    tools: list[Any] | None = None,
    batch: int = 8,
) -> list[float | None]:
    """The mean per-token negative log-likelihood of each reference answer, as the model's
    reply to its prompt (the chat template's generation prompt, then the answer and the end
    of the turn); None where a task has no reference."""
    import torch

    rows = []
    for prompt, reference, row_tools in zip(
        prompts, references, tools or [None] * len(prompts), strict=True
    ):
        if not reference:
            rows.append(None)
            continue
        text = tokenizer.apply_chat_template(
            prompt,
            tokenize=False,
            add_generation_prompt=True,
            tools=row_tools or None,
            **(template_kwargs or {}),
        )
        head = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = tokenizer(str(reference) + tokenizer.eos_token, add_special_tokens=False)
        rows.append((head, answer["input_ids"]))
    out: list[float | None] = [None] * len(rows)
    todo = [i for i, r in enumerate(rows) if r is not None]
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            seqs = [rows[i][0] + rows[i][1] for i in chunk]  # type: ignore[index]
            width = max(map(len, seqs))
            pad = tokenizer.pad_token_id
            ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
            labels = torch.full_like(ids, -100)
            for j, i in enumerate(chunk):
                head, answer = rows[i]  # type: ignore[misc]
                labels[j, len(head) : len(head) + len(answer)] = ids[
                    j, len(head) : len(head) + len(answer)
                ]
            with torch.inference_mode():
                logits = model(
                    input_ids=ids.to(model.device), attention_mask=mask.to(model.device)
                ).logits.float()
            shifted, targets = logits[:, :-1], labels[:, 1:].to(model.device)
            nll = torch.nn.functional.cross_entropy(
                shifted.reshape(-1, shifted.size(-1)),
                targets.reshape(-1),
                ignore_index=-100,
                reduction="none",
            ).view(targets.shape)
            counted = (targets != -100).sum(dim=1).clamp(min=1)
            for j, i in enumerate(chunk):
                out[i] = float(nll[j].sum() / counted[j])
    finally:
        model.train(was_training)
    return out


def load_arms(run_dir: Any) -> tuple[Any, Any, bool]:
    """The run's base model and tokenizer, and whether its result is a LoRA adapter.

    The base is what training started from (posttrain.gpu.models.start_model: the run's
    warm-start, else the base its launch decided, following resume chains). A LoRA run's
    trained arm is the base with final/ attached; a full fine-tune's is the weights in final/.
    """
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from posttrain.gpu.models import Device, load_tokenizer, start_model
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
    prompt), base_seeds, trained_seed, max_new_tokens, temperature, template_kwargs, and
    references (optional: their NLL under each arm). Returns {"base": [pass][prompt][k],
    "trained": [prompt][k], "nll": {"base": [prompt], "trained": [prompt]} or None}. The base
    passes run before the adapter is attached, so they can never see it (peft wraps the model
    in place).
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

    episodes = _episode_player(run_dir, tokenizer, job)

    def one_pass(m: Any, seed: int) -> list[list[Any]]:
        if episodes is not None:  # an environment run: [task][k] whole episodes
            return episodes(m, seed)
        flat = sample(m, tokenizer, prompts, seed=seed, tools=job.get("tools"), **settings)
        return [flat[i * k : (i + 1) * k] for i in range(len(prompts))]

    def nll(m: Any) -> list[float | None] | None:
        if not job.get("references"):
            return None
        return reference_nll(
            m,
            tokenizer,
            prompts,
            job["references"],
            template_kwargs=settings["template_kwargs"],
            tools=job.get("tools"),
        )

    base = [one_pass(model, seed) for seed in job["base_seeds"]]
    base_nll = nll(model)
    if is_adapter:
        from peft import PeftModel

        trained_model = PeftModel.from_pretrained(model, str(run_dir / "final"))
    else:
        from transformers import AutoModelForCausalLM

        from posttrain.gpu.models import Device

        trained_model = AutoModelForCausalLM.from_pretrained(
            str(run_dir / "final"), **Device.detect().model_kwargs()
        ).to(model.device)
    trained = one_pass(trained_model, int(job["trained_seed"]))
    return {
        "base": base,
        "trained": trained,
        "nll": {"base": base_nll, "trained": nll(trained_model)} if base_nll is not None else None,
    }


def _episode_player(run_dir: Any, tokenizer: Any, job: dict[str, Any]) -> Any:
    """For a run trained in an environment: `play(model, seed) -> [task][k] episodes`
    (posttrain.gpu.episodes), scored by get_reward and the spec's reward; else None."""
    from posttrain.runs.layout import SPEC
    from posttrain.spec import load_spec

    spec = load_spec(run_dir / SPEC)
    if spec.environment is None:
        return None
    from posttrain.gpu.environment import environment_class, episode_reward
    from posttrain.gpu.episodes import play_episodes
    from posttrain.rewards.registry import get_reward

    env_cls = environment_class(spec)
    named = get_reward(spec.reward.name, spec.reward.params) if spec.reward else None
    reward = episode_reward(named)

    def play(model: Any, seed: int) -> list[list[dict[str, Any]]]:
        return play_episodes(
            model,
            tokenizer,
            job["rows"],
            env_cls,
            reward,
            k=int(job["k"]),
            seed=seed,
            max_new_tokens=int(job["max_new_tokens"]),
            temperature=float(job["temperature"]),
            template_kwargs=job.get("template_kwargs") or {},
            max_turns=spec.environment.max_turns,  # type: ignore[union-attr]
        )

    return play
