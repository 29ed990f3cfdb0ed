"""The local dry run of a user's own spec: a Qwen preset, their file, their columns, offline,
with an empty Hugging Face cache. Real tokenizer, real TRL, real runs. (An SFT dry run of tool
chats with the user's own reward file: tests/test_tool_sft_flow.py, through the CLI.)"""

import json
import re
import time
from pathlib import Path

import pytest

from posttrain.core.errors import ConfigError
from posttrain.runs.layout import iter_events
from posttrain.tools.data import check_dataset
from posttrain.tools.launch import human_question, launch, smoke_run
from posttrain.tools.runs import sample_traces
from tests.conftest import offline_in, training_args, wait_finished

SYSTEM = "Réponds toujours en vers — answer in rhyme."
QUESTIONS = [
    ("Give three tips for staying healthy.", "Eat well, sleep enough, and move every day."),
    ("Pourquoi le ciel est-il bleu ?", "L'air diffuse la lumière bleue plus que la rouge."),
    ("東京はどこの首都ですか？", "Tokyo is the capital of Japan."),
    ("Name a primary colour — quickly!", "Red is a primary colour."),
    ("How do plants make food?", "By photosynthesis: sunlight, water and carbon dioxide."),
    ("Why do we have seasons?", "The tilt of the Earth's axis changes the sunlight."),
    ("What does a compass show?", "A compass needle points to magnetic north."),
    ("Wie viele Beine hat eine Spinne?", "Eine Spinne hat acht Beine."),
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def user_project(tmp_path_factory):
    """A user's folder: their JSONL files; no network, an empty HF cache."""
    root = tmp_path_factory.mktemp("project")
    rows = [
        {"id": f"q{i}", "question": f"{q} ({i})", "answer": a, "input": ""}
        for i, (q, a) in enumerate(QUESTIONS * 3)
    ]
    (root / "qa.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    chats = []
    for i, city in enumerate(["Zürich", "São Paulo", "Kraków", "Reykjavík"] * 4):
        chats.append(
            {
                "id": f"c{i}",
                "tools": [WEATHER_TOOL],
                "reference": f"Il fait {10 + i}°C à {city}.",
                "messages": [
                    {"role": "system", "content": "Tu es un assistant météo."},
                    {"role": "user", "content": f"Quel temps fait-il à {city} ? ({i})"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": {"city": city}},
                            }
                        ],
                    },
                    {"role": "tool", "content": f"{10 + i}°C"},
                    {"role": "assistant", "content": f"Il fait {10 + i}°C à {city}."},
                ],
            }
        )
    (root / "chats.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def offline_home(user_project, tmp_path_factory, empty_hf_home):
    with offline_in(user_project, tmp_path_factory, empty_hf_home) as home:
        yield home


def grpo_spec(project: Path) -> dict:
    """The canonical scenario as a user writes it: Qwen3-4B on Modal, their own file."""
    return {
        "model": "Qwen3-4B",
        "dataset": {
            "path": str(project / "qa.jsonl"),
            "prompt_template": "{question}",
            "reference_column": "answer",
            "system_prompt": SYSTEM,
            "holdout_share": 0.2,
        },
        "reward": "rhyme_relevance",
        "algorithm": {
            "kind": "grpo",
            "steps": 300,
            "batch_size": 64,
            "num_generations": 8,
            "max_completion_length": 256,
        },
        "compute": {"backend": "modal", "gpu": "H100"},
    }


@pytest.fixture(scope="module")
def grpo_dry_run(offline_home, user_project):
    result = smoke_run(grpo_spec(user_project))
    return result, wait_finished(result.run_id, 400)


def test_the_dry_run_of_a_qwen3_spec_succeeds_offline_and_says_what_it_cut(grpo_dry_run):
    result, detail = grpo_dry_run
    assert detail.status == "succeeded", detail.cause
    assert result.dry_run is not None
    assert "stand-in of Qwen3-4B: qwen3" in result.dry_run.stand_in
    assert result.dry_run.cuts["compute.backend"].startswith("modal -> local")
    assert result.dry_run.cuts["algorithm.batch_size"].startswith("64 -> 4")
    assert result.dry_run.cuts["algorithm.max_completion_length"].startswith("256 -> 32")
    assert result.cost.worst_case_usd == 0.0
    assert any("learning" in line for line in result.dry_run.cannot_prove)


def test_its_traces_hold_the_users_words_in_the_exact_qwen3_format(grpo_dry_run):
    _, detail = grpo_dry_run
    page = sample_traces(detail.run_id, steps="1-6", n=8)
    rows = [row for step in page.steps.values() for row in step]
    assert page.available_steps == [1, 2, 3, 4, 5, 6]
    by_text = {f"{q} ({i})": q for i, (q, _) in enumerate(QUESTIONS * 3)}
    for row in rows:
        assert row.prompt in by_text
        assert row.rendered == (
            f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{row.prompt}<|im_end|>\n"
            f"<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )
        assert "<unk>" not in row.rendered and "\ufffd" not in row.rendered
    # the system prompt's accents and dash came through above; the questions' own too
    assert any(any(ord(ch) > 0x7F for ch in row.prompt) for row in rows)


def test_it_resumes_from_a_checkpoint_and_runs_evaluates_generation(grpo_dry_run):
    _, detail = grpo_dry_run
    events = list(iter_events(Path(detail.run_dir)))
    stages = [e["stage"] for e in events if e["type"] == "stage"]
    assert stages.index("resume_check") < stages.index("saving") < stages.index("eval_check")
    assert sum(e["type"] == "proof_step" for e in events) == 1
    assert [c["step"] for c in detail.checkpoints] == [5, 6]
    assert detail.step == 6
    for arm in ("eval_base", "eval_trained"):
        traced = sample_traces(detail.run_id, steps="last", phase=arm, n=8)
        rows = [row for step in traced.steps.values() for row in step]
        assert len(rows) == 2 and all(r.completion is not None for r in rows)
    assert (Path(detail.run_dir) / "final" / "adapter_config.json").is_file()
    # The dry run proves the GPU's path: LoRA under gradient checkpointing.
    checkpoint = Path(detail.run_dir) / "checkpoints" / "checkpoint-5"
    assert training_args(checkpoint).gradient_checkpointing


def test_get_run_says_what_the_dry_run_proved_and_that_its_rewards_mean_nothing(grpo_dry_run):
    _, detail = grpo_dry_run
    assert detail.health == []
    dry = detail.dry_run
    assert dry["complete"] and "not meaningful" in dry["rewards"]
    proved = " ".join(dry["proved"])
    assert "resumed from checkpoint-5" in proved and "embedded" in dry["tokenizer"]
    assert "every prompt rendered through the chat template" in proved
    from importlib.metadata import version

    # what the Modal image installs: the very versions this dry run trained with
    assert f"transformers {version('transformers')}, trl {version('trl')}" in proved
    assert any("GPU speed" in line for line in dry["cannot_prove"])


def test_the_launch_question_then_says_the_spec_passed_a_dry_run(
    grpo_dry_run, user_project, modal_fake
):
    from posttrain.runs.context import Context

    _, detail = grpo_dry_run
    ctx = Context()
    asked_at = time.time()
    asked = human_question(grpo_spec(user_project), ctx=ctx)
    said = re.search(rf"Dry run: passed (\d+) min ago \({detail.run_id}\)\.", asked or "")
    assert said, asked
    ended = next(e["t"] for e in iter_events(Path(detail.run_dir)) if e["type"] == "result")
    # its age, rounded to minutes: a loaded suite may ask a minute or more after the run ended
    assert abs(int(said.group(1)) - (asked_at - ended) / 60) <= 1, (said.group(0), ended)
    other = {**grpo_spec(user_project), "reward": "rhyme"}
    assert "Dry run: none has passed" in human_question(other, ctx=ctx)


def test_no_weights_were_downloaded(grpo_dry_run, offline_home):
    import os

    hf_home = Path(os.environ["HF_HOME"])
    assert not list(hf_home.rglob("*.safetensors"))


def test_a_model_of_another_family_has_no_dry_run(offline_home, user_project):
    spec = {**grpo_spec(user_project), "model": "meta-llama/Llama-3.1-8B-Instruct"}
    with pytest.raises(ConfigError, match=r"has no stand-in: a dry run needs a model of the Qwen3"):
        smoke_run(spec)


def test_a_local_launch_of_a_real_preset_is_refused_with_the_way_out(offline_home, user_project):
    spec = {**grpo_spec(user_project), "compute": {"backend": "local"}}
    refused = r"Qwen3-4B on this machine's CPU is estimated at .* min.*smoke_run"
    with pytest.raises(ConfigError, match=refused):  # the plan's own estimate says why
        launch(spec)


def test_check_dataset_counts_real_tokens_and_names_a_row_the_template_refuses(
    offline_home, user_project
):
    spec = {**grpo_spec(user_project), "compute": {"backend": "local"}}
    report = check_dataset(spec)
    assert "embedded" in report.tokenizer and "FALLBACK" not in report.tokenizer
    assert report.samples[0].startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>")

    bad = user_project / "bad_chats.jsonl"
    lines = (user_project / "chats.jsonl").read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[0])
    broken["id"] = "broken-row"
    broken["messages"][0]["content"] = [{"type": "text", "text": "a list, not a string"}]
    bad.write_text("\n".join([*lines[1:], json.dumps(broken)]) + "\n", encoding="utf-8")
    report = check_dataset(
        {
            "model": "Qwen3-0.6B",
            "dataset": {"path": str(bad), "messages_column": "messages", "tools_column": "tools"},
            "algorithm": {"kind": "sft"},
        }
    )
    problem = next(p for p in report.problems if "do not render" in p)
    assert "row 'broken-row'" in problem and "TypeError" in problem


def test_the_export_path_merges_a_qwen3_lora_run_with_its_real_tokenizer(grpo_dry_run, tmp_path):
    """The user's Qwen3-4B spec, their file and columns: the tool refuses to export a dry run
    (its weights are random), and the merge itself, run on that run, writes a folder plain
    transformers loads, with Qwen3's real tokenizer and chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain.core.errors import ConfigError
    from posttrain.gpu.export_weights import export
    from posttrain.tools.export import export_run

    _, detail = grpo_dry_run
    with pytest.raises(ConfigError, match="is a dry run"):
        export_run(detail.run_id, tmp_path / "refused", roots=[tmp_path])
    info = export(Path(detail.run_dir), tmp_path / "merged")
    assert info["merged_adapter"] and info["chat_template"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "merged")
    assert model.config.model_type == "qwen3" and len(tokenizer) >= 151_643
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Pourquoi le ciel est-il bleu ?"}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert text.startswith("<|im_start|>user\nPourquoi le ciel est-il bleu ?<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    ids = tokenizer(text, return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=4, do_sample=False).shape[1] > ids.shape[1]


@pytest.mark.parametrize(
    ("steps", "runs", "said"),
    [(100, 6, "100 -> 6 (proof step"), (3, 3, None), (1, 2, "1 -> 2 (raised")],
)
def test_a_dry_run_cuts_only_lower_and_says_its_one_raise(steps, runs, said):
    from posttrain.gpu.dryrun import dry_run_spec
    from posttrain.spec.schema import load_spec

    spec = load_spec({"model": "Qwen3-0.6B", "algorithm": {"steps": steps, "eval_every": 1}})
    data, cuts = dry_run_spec(spec.model_dump(mode="json"), 5)
    assert data["algorithm"]["steps"] == runs
    assert (
        (cuts.get("algorithm.steps") or "").startswith(said)
        if said
        else "algorithm.steps" not in cuts
    )
    assert data["algorithm"]["eval_every"] == 1 and "algorithm.eval_every" not in cuts
