"""Evaluate's two arms on one model: the base passes, then the trained adapter or weights.

generate_job runs where the GPU is (a local child, or Modal's `generate` function): it loads
the run's base, samples (posttrain.gpu.generate) or plays whole episodes for a run trained in
an environment (posttrain.gpu.episodes), then attaches what the run trained and does it again.
It sits above generation, episodes and environments in the gpu chain, so none of them imports
it.
"""

from __future__ import annotations

from typing import Any

from posttrain.gpu.generate import sample
from posttrain.gpu.likelihood import preference_margins, reference_nll


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
    from posttrain.spec.schema import load_spec

    run_dir = Path(run_dir)
    spec = load_spec(run_dir / SPEC)
    base_path = start_model(run_dir, spec)
    device = Device.detect()
    model = AutoModelForCausalLM.from_pretrained(str(base_path), **device.model_kwargs("frozen"))
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
    references (optional: their NLL under each arm), pairs (optional, DPO: each held-out
    preference pair, its margin under each arm), feedback (optional, KTO: each held-out
    answer with its verdict, its mean token log-likelihood under each arm). Returns
    {"base": [pass][prompt][k], "trained": [prompt][k], "nll": {"base": [prompt], "trained":
    [prompt]} or None, "margins" and "logliks": the same shape or None}. The base
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

    def logliks(m: Any) -> list[float] | None:
        if not job.get("feedback"):
            return None
        from posttrain.gpu.kto_likelihood import answer_logliks

        return answer_logliks(m, tokenizer, job["feedback"], settings["template_kwargs"])

    def margins(m: Any) -> list[float] | None:
        if not job.get("pairs"):
            return None
        return preference_margins(m, tokenizer, job["pairs"], settings["template_kwargs"])

    base = [one_pass(model, seed) for seed in job["base_seeds"]]
    base_nll = nll(model)
    base_margins = margins(model)
    base_logliks = logliks(model)
    if is_adapter:
        from peft import PeftModel

        trained_model = PeftModel.from_pretrained(model, str(run_dir / "final"))
    else:
        from transformers import AutoModelForCausalLM

        from posttrain.gpu.models import Device

        trained_model = AutoModelForCausalLM.from_pretrained(
            str(run_dir / "final"), **Device.detect().model_kwargs("frozen")
        ).to(model.device)
    trained = one_pass(trained_model, int(job["trained_seed"]))
    return {
        "base": base,
        "trained": trained,
        "nll": {"base": base_nll, "trained": nll(trained_model)} if base_nll is not None else None,
        "margins": (
            {"base": base_margins, "trained": margins(trained_model)}
            if base_margins is not None
            else None
        ),
        "logliks": (
            {"base": base_logliks, "trained": logliks(trained_model)}
            if base_logliks is not None
            else None
        ),
    }


def _episode_player(run_dir: Any, tokenizer: Any, job: dict[str, Any]) -> Any:
    """For a run trained in an environment: `play(model, seed) -> [task][k] episodes`
    (posttrain.gpu.episodes), scored by get_reward and the spec's reward; else None."""
    from posttrain.runs.layout import SPEC
    from posttrain.spec.schema import load_spec

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
