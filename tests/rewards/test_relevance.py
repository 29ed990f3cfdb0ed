import contextlib
import pickle

import pytest

from posttrain.rewards.relevance import RelevanceReward, rescale, token_f1
from posttrain.rewards.rhyme_relevance import RhymeRelevanceReward

REFERENCE = (
    "Photosynthesis is how plants use sunlight, water and carbon dioxide to make glucose "
    "and oxygen."
)
RELATED = "Plants catch light in their leaves and turn water and air into sugar and oxygen."
UNRELATED = "The stock market fell sharply on Monday after the bank raised interest rates."
VERSE_ON_TOPIC = """A plant needs water, light and air
Its leaves hold chlorophyll with care
It turns the carbon gas to sugar sweet
And oxygen is what its leaves excrete"""
VERSE_OFF_TOPIC = """The ocean rolls beneath the silver moon
The sailors sing a slow and gentle tune
The gulls are crying high above the bay
And waves will wash the sandy shore away"""


@pytest.fixture(scope="module")
def relevance() -> RelevanceReward:
    reward = RelevanceReward()
    assert reward.embedder.load_error() is None, "the bundled MiniLM must load offline"
    return reward


def test_a_related_answer_beats_an_unrelated_one_with_the_real_minilm(relevance):
    scores = relevance.score([RELATED, UNRELATED, ""], reference=[REFERENCE] * 3)
    related, unrelated, empty = scores.rewards
    assert related > 0.6 > 0.1 > unrelated
    assert empty == 0.0
    assert scores.components["fallback"] == [0.0, 0.0, 0.0]
    assert scores.notes == []


def test_thinking_is_not_part_of_what_is_compared(relevance):
    with_thinking = relevance.score(
        ["<think>" + UNRELATED + "</think>" + RELATED], reference=[REFERENCE]
    )
    plain = relevance.score([RELATED], reference=[REFERENCE])
    assert with_thinking.rewards[0] == pytest.approx(plain.rewards[0], abs=1e-5)


def test_rescale_maps_the_cosine_band_onto_zero_to_one():
    assert rescale(0.10) == 0.0 and rescale(0.55) == pytest.approx(1.0)
    assert rescale(0.325) == pytest.approx(0.5) and rescale(-1) == 0.0 and rescale(0.9) == 1.0


def test_an_embedder_that_cannot_load_falls_back_to_token_f1_and_says_so():
    reward = RelevanceReward(model="/nonexistent/embedder")
    scores = reward.score([RELATED, UNRELATED], reference=[REFERENCE] * 2)
    assert scores.components["fallback"] == [1.0, 1.0]
    assert any("token-F1 fallback" in note for note in scores.notes)
    assert scores.rewards[0] == pytest.approx(token_f1(RELATED, REFERENCE))
    assert scores.rewards[0] > scores.rewards[1]


def test_a_missing_reference_column_names_the_column_and_the_fix(relevance):
    with pytest.raises(KeyError, match="needs the dataset column 'reference'"):
        relevance.score([RELATED], answer=[REFERENCE])


def test_rhyme_relevance_pays_on_topic_verse_and_gates_off_topic_verse(relevance):
    reward = RhymeRelevanceReward()
    scores = reward.score([VERSE_ON_TOPIC, VERSE_OFF_TOPIC, RELATED], reference=[REFERENCE] * 3)
    on_topic, off_topic, prose = scores.rewards
    assert on_topic > 1.0  # gate open, rhyme 1, plus 0.3 x relevance
    assert scores.components["rhyme"][1] == 1.0  # the off-topic verse rhymes perfectly...
    assert off_topic < 0.3  # ...but the gate stops it collecting
    assert prose == pytest.approx(0.3 * scores.components["relevance"][2])
    for i in range(3):
        gate, rhyme, rel = (scores.components[k][i] for k in ("gate", "rhyme", "relevance"))
        assert gate == pytest.approx(min(1.0, rel / 0.4))
        assert scores.rewards[i] == pytest.approx(gate * rhyme + 0.3 * rel)


def test_rhyme_relevance_takes_flat_parameters_and_pickles():
    reward = RhymeRelevanceReward.from_params(reference_column="answer", min_words_per_line=2)
    assert reward.columns == ("answer",) and reward.rhyme.min_words_per_line == 2
    assert pickle.loads(pickle.dumps(reward)) == reward


def test_a_text_is_embedded_once_and_its_remembered_vector_gives_the_same_score(
    relevance, monkeypatch
):
    from posttrain.rewards import relevance as module

    fresh = relevance.score([RELATED, UNRELATED], reference=[REFERENCE] * 2).rewards
    model = module._load(relevance.embedder.model_name, None)
    encoded: list[str] = []
    real_encode = model.encode

    def counting_encode(texts, **kwargs):
        encoded.extend(texts)
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(model, "encode", counting_encode)
    new = "Chlorophyll in a leaf turns light, water and air into sugar, and lets oxygen go."
    again = relevance.score([RELATED, UNRELATED, new], reference=[REFERENCE] * 3)
    assert again.rewards[:2] == fresh  # the remembered vectors score exactly as before
    assert encoded == [new]  # only the text it had not seen was embedded


def test_on_a_cpu_it_embeds_8_texts_a_pass_and_scores_as_in_one_pass(relevance, monkeypatch):
    """Small passes pad less (the figures: batch_size_for's docstring); the scores
    must not depend on how the texts were cut into passes."""
    from posttrain.rewards import relevance as module

    model = module._load(relevance.embedder.model_name, None)
    sizes: list[int] = []
    real_encode = model.encode

    def recording_encode(texts, **kwargs):
        sizes.append(kwargs["batch_size"])
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(model, "encode", recording_encode)
    texts = [VERSE_ON_TOPIC, VERSE_OFF_TOPIC, RELATED, UNRELATED] * 3
    texts = [f"{text} ({i})" for i, text in enumerate(texts)]  # 12 texts none of it has seen
    by_device = relevance.score(texts, reference=[REFERENCE] * 12).rewards
    monkeypatch.setattr(module, "_VECTORS", {})  # forget them, to embed them again
    one_pass = RelevanceReward(batch_size=64).score(texts, reference=[REFERENCE] * 12).rewards
    assert sizes == [module.batch_size_for(str(model.device)), 64]
    assert str(model.device) != "cpu" or sizes[0] == 8
    assert by_device == pytest.approx(one_pass, abs=1e-5)


def test_on_a_cpu_with_native_bfloat16_it_embeds_in_bfloat16_and_scores_as_in_float32(
    relevance, monkeypatch
):
    """bfloat16 is three times faster on such a CPU (precision_for's docstring); a relevance
    score must not move by more than a rounding of the last shown digit."""
    import torch

    from posttrain.rewards import relevance as module

    model = module._load(relevance.embedder.model_name, None)
    dtypes: list[torch.dtype] = []
    first_linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    hook = first_linear.register_forward_hook(lambda _m, _i, out: dtypes.append(out.dtype))
    texts = [f"{text} ({i})" for i, text in enumerate([VERSE_ON_TOPIC, RELATED, UNRELATED] * 3)]
    try:
        fast = relevance.score(texts, reference=[REFERENCE] * 9).rewards
        monkeypatch.setattr(module, "_VECTORS", {})
        monkeypatch.setattr(module, "precision_for", lambda _device: contextlib.nullcontext())
        exact = relevance.score(texts, reference=[REFERENCE] * 9).rewards
    finally:
        hook.remove()
    native = str(model.device) == "cpu" and module._native_bf16()
    expected = torch.bfloat16 if native else torch.float32
    assert dtypes[0] == expected and dtypes[-1] == torch.float32, dtypes
    assert fast == pytest.approx(exact, abs=2e-3)
