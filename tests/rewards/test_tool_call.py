import json

import pytest

from posttrain.rewards.tool_call import ToolCallReward, normalise_calls

LABEL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
WIRE = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "arguments": json.dumps({"unit": "celsius", "city": "Paris"}),
    },
}
TEXT = (
    '<think>the user wants weather</think><tool_call>{"name": "get_weather", '
    '"arguments": {"city": "Paris", "unit": "celsius"}}</tool_call>'
)

reward = ToolCallReward()


def score(completion, label=LABEL) -> float:
    return reward.score([completion], tool_call=[label]).rewards[0]


def test_both_shapes_of_the_same_call_score_the_same():
    rollout = [{"role": "assistant", "content": "", "tool_calls": [LABEL]}]
    wire = [{"role": "assistant", "content": "", "tool_calls": [WIRE]}]
    assert score(rollout) == score(wire) == score(TEXT) == 1.0


def test_labels_in_either_shape_normalise_alike():
    assert normalise_calls(WIRE) == normalise_calls(LABEL) == normalise_calls(json.dumps(WIRE))


def test_a_wrong_argument_costs_more_than_half_of_the_score():
    wrong_city = TEXT.replace("Paris", "Lyon")
    assert score(wrong_city) == pytest.approx(0.25 + 0.25 * 0.5)
    assert score(TEXT.replace("Paris", "Lyon")) > score(TEXT.replace("get_weather", "get_time"))


def test_a_wrong_tool_or_no_call_scores_zero():
    assert score(TEXT.replace("get_weather", "get_time")) == 0.0
    assert score("It is sunny in Paris.") == 0.0
    assert score("<tool_call>{not json}</tool_call>") == 0.0


def test_an_extra_call_costs_as_much_as_a_missing_one():
    two = TEXT + TEXT
    assert score(two) == pytest.approx(0.5)


def test_components_say_what_was_parsed_and_matched():
    scores = reward.score([TEXT, "no call"], tool_call=[LABEL, LABEL])
    assert scores.components == {
        "parsed": [1.0, 0.0],
        "name": [1.0, 0.0],
        "arguments": [1.0, 0.0],
    }
