import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrain.rewards.rhyme import RhymeReward, scheme_pairs

AABB = """The sun came up to greet the day
And children ran outside to play
The river sang a gentle tune
Beneath the silver summer moon"""

ABAB = """The sun came up to greet the day
The river sang a gentle tune
And children ran outside to play
Beneath the silver summer moon"""

PROSE = """Paris is the capital of France.
It has been the capital for centuries.
The city is known for art and food.
Many tourists visit it every year."""

reward = RhymeReward()


def score(text: str) -> float:
    return reward.score_text(text)[0]


def test_aabb_and_abab_verse_score_full_marks():
    assert score(AABB) == 1.0
    assert score(ABAB) == 1.0


def test_prose_scores_zero():
    assert score(PROSE) == 0.0


def test_the_bundled_verse_answers_all_rhyme(qa_rows):
    assert [score(r["verse"]) for r in qa_rows] == [1.0] * len(qa_rows)


def test_self_rhymes_do_not_count():
    same_word = "I walked along the road all day\nI sang a song for all the day\n" * 2
    assert score(same_word) == 0.0
    identical = "I walked along a road of light\nI sang a song of pure delight\n" * 2
    assert reward.score_text(identical)[1]["scheme"] == 0.0


def test_one_word_lines_score_low():
    assert score("cat\nhat\nbat\nmat") == 0.0
    assert score("the cat\nthe hat\nthe bat\nthe mat") == 0.0  # two words is still too few


def test_a_two_line_answer_is_penalised():
    couplet = "The sun came up to greet the day\nAnd children ran outside to play"
    value, parts = reward.score_text(couplet)
    assert value == 0.5 and parts["length"] == 0.5


def test_a_poem_padded_past_max_lines_pays_in_proportion():
    eight = AABB + "\nThe wind came down the hill at night\nAnd filled the town with silver light"
    eight += "\nThe baker sang beside the door\nAnd danced upon the kitchen floor"
    assert score(eight) == 1.0  # no limit by default: a longer poem is still a poem
    capped = RhymeReward(max_lines=4)
    assert capped.score_text(AABB)[0] == 1.0
    value, parts = capped.score_text(eight)
    assert value == 0.5 and parts["length"] == 0.5 and parts["scheme"] == 1.0


def test_fewer_than_two_lines_scores_zero():
    assert score("The sun came up to greet the day") == 0.0
    assert score("") == 0.0


def test_trailing_lines_after_the_scheme_are_not_free():
    # An ABAB quatrain then two lines that do not rhyme: they form a third pair, which fails.
    text = ABAB + "\nThe stock market fell sharply on Monday\nAnd analysts had plenty to report"
    value, parts = reward.score_text(text)
    assert parts["scheme"] == pytest.approx(2 / 3)
    assert value == pytest.approx(2 / 3)


def test_thinking_and_markdown_do_not_change_the_score():
    dressed = "<think>rhyme day with play</think>\n" + "\n".join(f"- {x}" for x in AABB.split("\n"))
    assert score(dressed) == score(AABB) == 1.0


def test_thinking_only_scores_zero():
    assert score(f"<think>\n{AABB}\n</think>") == 0.0


def test_naive_settings_reproduce_the_known_exploits():
    naive = RhymeReward(min_words_per_line=0, distinct_end_words=False, identical_rhymes_count=True)
    assert naive.score_text("cat\nhat\nbat\nmat")[0] == 1.0
    assert naive.score_text("I saw the day\nI met the day\nI had the day\nI lost the day")[0] == 1.0


def test_scheme_pairs_cover_every_line_but_an_odd_last_one():
    assert scheme_pairs(4, "aabb") == [(0, 1), (2, 3)]
    assert scheme_pairs(4, "abab") == [(0, 2), (1, 3)]
    assert scheme_pairs(6, "abab") == [(0, 2), (1, 3), (4, 5)]
    assert scheme_pairs(5, "aabb") == [(0, 1), (2, 3)]  # line 5 has no partner...


def test_an_odd_last_line_counts_as_a_missed_pair():
    # ...so it is a pair that does not rhyme: a quatrain plus one prose line is 2 of 3 pairs
    for verse in (AABB, ABAB):
        score, parts = reward.score_text(verse + "\nAnd that is all I have to say about it")
        assert parts["scheme"] == pytest.approx(2 / 3)
        assert score < 1.0


def test_batch_scores_report_components_per_completion():
    scores = reward.score([AABB, PROSE, [{"role": "assistant", "content": ABAB}]])
    assert scores.rewards == [1.0, 0.0, 1.0]
    assert set(scores.components) == set(RhymeReward.components)
    assert scores.row(1)["scheme"] == 0.0


def test_explain_shows_end_words_and_tails():
    lines = reward.explain(AABB)["lines"]
    assert [line["end_word"] for line in lines] == ["day", "play", "tune", "moon"]
    assert lines[0]["tails"] == ["EY"]


def test_reward_survives_a_pickle_round_trip():
    clone = pickle.loads(pickle.dumps(RhymeReward(min_words_per_line=2)))
    assert clone == RhymeReward(min_words_per_line=2)
    assert clone([AABB]) == [1.0]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_scores_within_zero_and_one(text):
    value, parts = reward.score_text(text)
    assert 0.0 <= value <= 1.0
    assert all(0.0 <= v <= 1.0 for v in parts.values())
