"""A real small model made ready for environments: SmolLM2-135M-Instruct's GGUF template renders
no tool calls, so posttrain gives it Qwen2.5's ChatML tool template (with its own default
system line) and TRL's parser; and the warm-start of an environment spec trains on each row's
demonstration played through the environment (real tool results), rendered by that template
with the loss on the assistant turns only."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.environments.calculator import rows as calculator_rows
from posttrain.gpu import tokenizers
from posttrain.gpu.environment import check_template, demo_episodes
from posttrain.gpu.sft_text import SftRenderer
from posttrain.gpu.weights import TOOL_TEMPLATE_MARK, tool_template
from posttrain.spec.schema import load_spec
from tests.conftest import ROOT

SMOL = "SmolLM2-135M-Instruct"
SYSTEM = "You solve arithmetic word problems with the calculator tools."
# SmolLM2-135M-Instruct's own template, as its GGUF ships it: content only, no tools
SMOL_GGUF_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def smol():
    """SmolLM2's tokenizer as posttrain loads it (the converted folder's, else the GGUF's)."""
    tokenizers._load.cache_clear()
    try:
        yield tokenizers.load_tokenizer(SMOL).tokenizer
    finally:
        tokenizers._load.cache_clear()


@pytest.fixture(scope="module")
def calculator(tmp_path_factory):
    """The calculator spec on the shipped tasks, with their rows as the trainer reads them."""
    from posttrain.data.dataset import prepare
    from posttrain.environments.calculator import DATA

    spec = load_spec(
        {
            "model": {"name": SMOL},
            "environment": {"name": "calculator", "demo_column": "demo", "max_turns": 3},
            "dataset": {
                "path": str(DATA),
                "system_prompt": SYSTEM,
                "reference_column": "answer",
                "holdout_share": 0.25,
            },
            "algorithm": {"kind": "grpo", "warmstart": {"steps": 1}},
        }
    )
    return spec, prepare(spec.dataset, "prompts").train


def test_smollm2_renders_tool_conversations_with_its_own_default_system_line(smol):
    from trl.chat_template_utils import get_training_chat_template, supports_tool_calling

    assert smol.chat_template.startswith(TOOL_TEMPLATE_MARK)
    assert supports_tool_calling(smol)
    assert get_training_chat_template(smol) is None  # its own template marks assistant turns
    check_template(smol, SMOL)  # refused before step 1 until now
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    text = smol.apply_chat_template(plain, tokenize=False)
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
    )  # what its GGUF template rendered: the same turns, the same default system line
    parsed = smol.parse_response(
        '<tool_call>\n{"name": "calculate", "arguments": {"expression": "3 * 4"}}\n</tool_call>',
        prefix="",
    )  # TRL reads a rollout's calls back with this
    assert parsed["tool_calls"][0]["function"] == {
        "name": "calculate",
        "arguments": {"expression": "3 * 4"},
    }


def test_the_tool_template_replaces_only_a_chatml_template_without_tools(smol):
    from trl.chat_template_utils import supports_tool_calling

    own, parser = smol.chat_template, smol.response_template
    try:
        smol.chat_template, smol.response_template = SMOL_GGUF_TEMPLATE, None
        assert not supports_tool_calling(smol)
        tool_template(smol)
        assert smol.chat_template == own and smol.response_template == parser
        not_chatml = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        smol.chat_template, smol.response_template = not_chatml, None
        assert tool_template(smol).chat_template == not_chatml  # left as it was
        assert smol.response_template is None
    finally:
        smol.chat_template, smol.response_template = own, parser


def test_the_warm_start_plays_each_demonstration_through_the_environment(calculator, smol):
    spec, rows = calculator
    shipped = {r["prompt"]: r for r in calculator_rows()}
    wire = dict(rows[1])  # the same demonstration in the OpenAI wire shape
    wire["demo"] = [
        {
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for c in wire["demo"]
    ]
    played = demo_episodes(spec, [rows[0], wire, {**rows[2], "demo": []}])
    assert len(played) == 2  # a row without a demonstration is left out
    first = played[0]
    task = shipped[rows[0]["prompt_text"].split("\n\n")[0]]
    expression = task["demo"][0]["arguments"]["expression"]
    assert [m["role"] for m in first["completion"]] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert first["completion"][0]["tool_calls"][0]["function"] == {
        "name": "calculate",
        "arguments": {"expression": expression},
    }
    answer = str(task["answer"])
    assert first["completion"][1] == {"role": "tool", "name": "calculate", "content": answer}
    assert first["completion"][3]["content"] == "Answer recorded."  # the environment's reply
    assert first["completion"][4] == {"role": "assistant", "content": answer}
    assert first["prompt"][-1]["content"].endswith("submit your answer with submit_answer.")
    assert [t["function"]["name"] for t in first["tools"]] == ["calculate", "submit_answer"]
    assert played[1]["completion"][:2] == demo_episodes(spec, [rows[1]])[0]["completion"][:2]

    trained = SftRenderer(smol, "assistant_turns", family_template="qwen2_5")(first)
    assert "the model's own chat template" in SftRenderer(smol, "assistant_turns").described
    spans = [trained.text[a:b] for a, b in trained.spans]
    assert len(spans) == 3  # two calls and the answer carry the loss; tool results do not
    assert '"name": "calculate"' in spans[0] and '"name": "submit_answer"' in spans[1]
    assert spans[2].strip().startswith(answer)
    assert "<tool_response>" in trained.text and not any("<tool_response>" in s for s in spans)
    assert trained.text.startswith(f"<|im_start|>system\n{SYSTEM}\n\n# Tools")


def test_a_warm_start_without_usable_demonstrations_is_refused_with_the_fix(calculator):
    spec, rows = calculator
    with pytest.raises(ConfigError, match="no training row has one"):
        demo_episodes(spec, [{**r, "demo": None} for r in rows[:3]])
    with pytest.raises(ConfigError, match="is not a tool call"):
        demo_episodes(spec, [{**rows[0], "demo": ["say 42"]}])


def test_an_environment_specs_warm_start_trains_on_played_demonstrations(calculator):
    from posttrain.gpu.trainers import _as_sft

    spec, rows = calculator
    assert _as_sft(rows[:2], spec) == demo_episodes(spec, rows[:2])
    plain = spec.model_copy(update={"environment": None})  # no environment: the target text
    assert _as_sft(rows[:1], plain)[0]["completion"] == [
        {"role": "assistant", "content": str(rows[0]["reference"])}
    ]


def test_the_benches_of_the_learning_experiment_and_the_stand_in_loop_are_valid_specs(tmp_path):
    """bench/environment_learning.py (SmolLM2) and bench/environment_loop.py (the stand-in):
    their specs validate and their data has a demonstration on every row that pays 1.0."""
    import importlib.util

    from posttrain.environments.calculator import Calculator

    def bench(name):
        path = ROOT / "bench" / f"{name}.py"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return module

    learning, loop = bench("environment_learning"), bench("environment_loop")
    rows = learning.calculator_rows(12)
    for row in rows:  # every generated demonstration solves its task
        env = Calculator()
        env.reset(**row)
        for call in row["demo"]:
            getattr(env, call["name"])(**call["arguments"])
        assert env.get_reward() == 1.0
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_spec(learning.learning_spec(data, 0.25, 2, 2)).model.name == SMOL
    stand_in = load_spec(loop.loop_spec(loop.write_task(tmp_path / "task.jsonl"), 2, 1))
    assert stand_in.model.stand_in and stand_in.environment.demo_column == "demo"
