import pickle

import pytest

from posttrain.rewards import phonetics
from posttrain.rewards.phonetics import rhyme_table, rhymes, tail_and_onset


def rhyme(a: str, b: str) -> bool:
    table = rhyme_table()
    return rhymes(table.lookup(a)[0], table.lookup(b)[0])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("cat", "hat"),
        ("day", "play"),
        ("tree", "free"),
        ("light", "flight"),
        ("moon", "tune"),
        ("nation", "station"),
        ("higher", "fire"),
    ],
)
def test_dictionary_pairs_that_rhyme(a, b):
    assert rhyme(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("cat", "dog"), ("day", "dry"), ("moon", "moan"), ("happy", "sea"), ("love", "move")],
)
def test_dictionary_pairs_that_do_not_rhyme(a, b):
    assert not rhyme(a, b)


@pytest.mark.parametrize(("a", "b"), [("day", "day"), ("light", "delight"), ("sight", "site")])
def test_identical_rhymes_do_not_count(a, b):
    assert not rhyme(a, b)


def test_any_pronunciation_may_rhyme():
    # "read" is R EH D and R IY D: it rhymes with both "bed" and "seed".
    assert rhyme("read", "bed") and rhyme("read", "seed")


def test_tail_starts_at_the_last_stressed_vowel():
    assert tail_and_onset(["D", "IH0", "L", "AY1", "T"]) == ("AY T", "L")
    assert tail_and_onset(["HH", "AE1", "P", "IY0"]) == ("AE P IY", "HH")


def test_words_outside_the_dictionary_fall_back_to_marked_letters():
    table = rhyme_table()
    keys, known = table.lookup("blorpcat")
    assert not known
    assert table.tail_text(keys[0]) == "~cat"
    assert rhyme("blorpcat", "zingcat")  # two letter tails may match...
    assert not rhyme("blorpcat", "hat")  # ...but letters never match phonemes


def test_table_is_cached_on_disk_and_reloads_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    phonetics.rhyme_table.cache_clear()
    try:
        built = phonetics.rhyme_table()
        [cache_file] = tmp_path.glob("rhyme-table-*.pickle")
        phonetics.rhyme_table.cache_clear()
        loaded = phonetics.rhyme_table()
        assert loaded.keys == built.keys and loaded.tails == built.tails
        assert pickle.loads(cache_file.read_bytes()).keys["cat"] == built.keys["cat"]
    finally:
        phonetics.rhyme_table.cache_clear()


def test_a_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    phonetics.rhyme_table.cache_clear()
    try:
        phonetics._cache_path().parent.mkdir(parents=True, exist_ok=True)
        phonetics._cache_path().write_bytes(b"not a pickle")
        assert "cat" in phonetics.rhyme_table().keys
    finally:
        phonetics.rhyme_table.cache_clear()
