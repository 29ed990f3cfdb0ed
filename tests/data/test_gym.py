import itertools
import statistics

from posttrain.data import gym
from posttrain.gpu.tiny import build_model, build_tokenizer
from posttrain.rewards.phonetics import rhyme_table, rhymes
from posttrain.rewards.rhyme import RhymeReward


def keys(word):
    return rhyme_table().lookup(word)[0]


def test_every_rhyme_class_rhymes_within_and_never_across():
    for cls in gym.RHYME_CLASSES:
        assert all(w in rhyme_table().keys for w in cls)
        assert all(rhymes(keys(a), keys(b)) for a, b in itertools.combinations(cls, 2))
    for a_cls, b_cls in itertools.combinations(gym.RHYME_CLASSES, 2):
        assert not any(rhymes(keys(a), keys(b)) for a in a_cls for b in b_cls)


def test_the_gym_is_deterministic_and_rhymes_only_part_of_the_time():
    rows = gym.rows(600)
    assert rows == gym.rows(600)
    reward = RhymeReward()
    assert all(reward.score_text(r["reference"])[0] == 1.0 for r in rows)
    share = statistics.fmean(reward.score_text(r["response"])[0] for r in rows)
    assert 0.2 < share < 0.4  # 30% of warm-start answers rhyme


def test_the_tiny_tokenizer_round_trips_verse_and_marks_assistant_turns():
    tokenizer = build_tokenizer()
    verse = "the ocean hear wrong\nlittle it dark sight"
    ids = tokenizer(verse)["input_ids"]
    assert tokenizer.decode(ids) == verse and tokenizer.unk_token_id not in ids
    chat = [
        {"role": "user", "content": gym.prompt_text("ocean")},
        {"role": "assistant", "content": verse},
    ]
    out = tokenizer.apply_chat_template(chat, return_assistant_tokens_mask=True, return_dict=True)
    marked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    newline = tokenizer("\n")["input_ids"]
    # the answer, its end and the newline after it (trained, as before issue 21), nothing else
    assert marked == [*ids, tokenizer.eos_token_id, *newline]


def test_the_tiny_model_is_qwen3_shaped_and_small():
    model = build_model(build_tokenizer())
    assert model.config.model_type == "qwen3"
    assert 500_000 < sum(p.numel() for p in model.parameters()) < 700_000
