from posttrain.rewards.text import (
    completion_text,
    end_word,
    plain_text,
    strip_thinking,
    verse_lines,
)


def test_thinking_blocks_and_stray_tags_are_removed():
    text = "<think>plan the rhyme</think>The cat sat<|im_end|>"
    assert plain_text(text) == "The cat sat"


def test_an_unclosed_thinking_block_leaves_no_answer():
    assert plain_text("Intro <think>and then the model ran out of tokens") == "Intro"


def test_a_closing_tag_alone_drops_the_thinking_before_it():
    # The <think> opened in the prompt (Qwen3 templates do this).
    assert plain_text("reasoning here</think>\nThe answer") == "The answer"


def test_markdown_markers_are_not_part_of_the_lines():
    text = "- first line here\n* second line here\n1. third line here\n## fourth line here"
    assert verse_lines(text) == [
        "first line here",
        "second line here",
        "third line here",
        "fourth line here",
    ]


def test_lines_without_words_are_not_verse_lines():
    assert verse_lines("one line\n---\n***\n\n   \nanother line") == ["one line", "another line"]


def test_end_word_ignores_punctuation_and_case():
    assert end_word("And so we greet the Day!") == "day"
    assert end_word("a well-known") == "known"


def test_a_line_ending_in_a_number_has_no_end_word():
    assert end_word("The answer is 42.") is None


def test_conversational_completions_are_read_as_text():
    completion = [{"role": "assistant", "content": "hello there"}]
    assert completion_text(completion) == "hello there"
    assert strip_thinking("no tags at all") == "no tags at all"
