"""The rhyme reward: does the response rhyme in couplets (AABB) or alternate lines (ABAB)?

score = scheme x distinct x wordy x length, each in [0, 1]:
  scheme   the best of AABB and ABAB, as the share of the scheme's pairs that rhyme, an odd
           last line counting as a pair that does not
  distinct distinct end words / lines
  wordy    lines with at least `min_words_per_line` words / lines
  length   min(1, lines / full_length_lines); fewer than two lines scores 0; past
           `max_lines` (when set), max_lines / lines

The rules, each with its reason:
- Thinking blocks, chat tags and markdown markers are removed first: the reader never sees them.
- A word rhymes through any of its pronunciations ("read" rhymes with "bed" and with "seed"):
  the poet may mean either.
- Tails must match from the last *stressed* vowel: "happy"/"sea" share only an unstressed IY.
- The same word, a homophone, or the same consonant before the stressed vowel ("light"/
  "delight", "sight"/"site") is an identical rhyme and does not count: repeating a word is
  the cheapest way up a naive rhyme reward.
- Every line belongs to a pair: ABAB runs over whole quatrains and a trailing pair of lines is
  a couplet, so lines after the last quatrain are never free; an odd last line is a pair
  that was missed (a quatrain plus a prose line scores 2 of 3 pairs).
- The distinct share stops "day / day / day / day" even where the pairs were not compared.
- The wordy share stops one-word lines ("cat / hat / bat / mat"), the other cheap exploit.
- The length factor makes a two-line answer worth half a quatrain: a couplet is not a poem.
  With `max_lines` set, a poem padded past it pays max_lines / lines: more lines are more
  chances at a rhyming pair and more topic words, and a policy sampled for reward drifts to
  the longest answer it may write (seen in the demo: 4 lines became 8, cut off at the
  completion limit, and the rhyme never came).
- A line whose last token is a number or symbol has no end word and cannot rhyme.
- Words missing from the dictionary fall back to their last three letters, and such a tail
  only matches another such tail (letters and phonemes cannot be compared); the share of
  unknown end words is reported so that a trace shows when the fallback decided a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import Field

from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.phonetics import ONSET_BITS, RhymeTable, rhyme_table, rhymes
from posttrain.rewards.text import WORD, completion_text, end_word, verse_lines

_TRAILING = "\"'.,;:!?)]}*_~`”’ \t"  # closing punctuation after a line's last word
ZERO = {"scheme": 0.0, "distinct": 0.0, "wordy": 0.0, "length": 0.0, "unknown": 0.0}


def scheme_pairs(n_lines: int, scheme: str) -> list[tuple[int, int]]:
    """Index pairs that must rhyme: AABB = (0,1),(2,3)...; ABAB = (0,2),(1,3) per quatrain,
    with a trailing pair of lines after the last quatrain paired as a couplet."""
    if scheme == "aabb":
        return [(i, i + 1) for i in range(0, n_lines - 1, 2)]
    pairs = []
    full = n_lines - n_lines % 4
    for i in range(0, full, 4):
        pairs += [(i, i + 2), (i + 1, i + 3)]
    if n_lines - full >= 2:
        pairs.append((full, full + 1))
    return pairs


_PAIRS = {(n, s): scheme_pairs(n, s) for n in range(2, 65) for s in ("aabb", "abab")}


def _pairs(n_lines: int, scheme: str) -> list[tuple[int, int]]:
    pairs = _PAIRS.get((n_lines, scheme))
    return pairs if pairs is not None else scheme_pairs(n_lines, scheme)


@dataclass(frozen=True)
class RhymeReward(Reward):
    """Rhyme in AABB or ABAB, hardened against self-rhymes, one-word lines and short answers."""

    name: ClassVar[str] = "rhyme"
    components: ClassVar[tuple[str, ...]] = ("scheme", "distinct", "wordy", "length", "unknown")
    headline: ClassVar[tuple[str, ...]] = ("scheme", "distinct")
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    min_words_per_line: Annotated[int, Field(ge=0, le=50)] = 3  # 0: one-word lines allowed
    full_length_lines: Annotated[int, Field(ge=0, le=64)] = 4  # 0: no length factor
    max_lines: Annotated[int, Field(ge=0, le=256)] = 0  # 0: no limit; past it, max_lines/lines
    distinct_end_words: bool = True  # multiply by the share of distinct end words
    identical_rhymes_count: bool = False  # True: "day"/"day", "light"/"delight" count (naive)

    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        table = rhyme_table()
        rows = [self.score_text(completion_text(c), table) for c in completions]
        return Scores(
            rewards=[r for r, _ in rows],
            components={k: [parts[k] for _, parts in rows] for k in self.components},
        )

    def score_text(
        self, text: str, table: RhymeTable | None = None
    ) -> tuple[float, dict[str, float]]:
        """The reward for one response and its components."""
        lines = verse_lines(text)
        n = len(lines)
        if n < 2:
            return 0.0, ZERO
        table = table or rhyme_table()
        ends: list[str | None] = []
        keys: list[tuple[int, ...] | None] = []
        unknown = wordy_lines = 0
        for line in lines:
            words = WORD.findall(line)
            wordy_lines += len(words) >= self.min_words_per_line
            # Fast path: a line ending in a letter (after punctuation) ends in its last word.
            stripped = line.rstrip(_TRAILING)
            word = words[-1].lower() if stripped and stripped[-1].isalpha() else end_word(line)
            ends.append(word)
            if word is None:
                keys.append(None)
                continue
            word_keys = table.keys.get(word)
            if word_keys is None:
                unknown += 1
                word_keys = (table.orthographic_key(word),)
            keys.append(word_keys)

        best = 0
        for scheme in ("aabb", "abab"):
            hits = 0
            for i, j in _pairs(n, scheme):
                a, b = keys[i], keys[j]
                if a is None or b is None:
                    continue
                if self.identical_rhymes_count:
                    hits += any(x >> ONSET_BITS == y >> ONSET_BITS for x in a for y in b)
                elif ends[i] != ends[j] and rhymes(a, b):
                    hits += 1
            best = max(best, hits)
        scheme_score = best / ((n + 1) // 2)  # an odd last line is a missed pair

        distinct = len({w for w in ends if w}) / n if self.distinct_end_words else 1.0
        wordy = wordy_lines / n
        length = min(1.0, n / self.full_length_lines) if self.full_length_lines else 1.0
        if self.max_lines and n > self.max_lines:
            length *= self.max_lines / n
        parts = {
            "scheme": scheme_score,
            "distinct": distinct,
            "wordy": wordy,
            "length": length,
            "unknown": unknown / n,
        }
        return scheme_score * distinct * wordy * length, parts

    def explain(self, text: str) -> dict[str, Any]:
        """Why a response scored what it did: each line's end word, its tails, and the score."""
        table = rhyme_table()
        reward, parts = self.score_text(text, table)
        lines = []
        for line in verse_lines(text):
            word = end_word(line)
            if word is None:
                lines.append({"line": line, "end_word": None, "tails": []})
                continue
            keys, known = table.lookup(word)
            tails = sorted({table.tail_text(k) for k in keys})
            lines.append({"line": line, "end_word": word, "tails": tails, "in_dictionary": known})
        return {"reward": reward, "components": parts, "lines": lines}
