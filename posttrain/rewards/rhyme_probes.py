"""The degenerate outputs any reward may pay, and the rhyme world's probes.

The degenerate ones (the same word ending every line, one-word lines, one line repeated, the
answer padded to the length limit) cost a reward nothing to score and are what a policy finds
first, so every reward meets them. The rhyme family (one long line, forty short lines, verse
in a thinking block, rhyming gibberish, off-topic verse...) fits a reward that pays rhyme,
whatever its name: `pays_rhyme` asks the reward whether rhymed lines earn more than the same
lines unrhymed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from posttrain.rewards.base import Reward, graded_mean
from posttrain.rewards.guards import checked_scores
from posttrain.rewards.probe_types import Probe, Row

# Rhyme classes checked against the CMU dictionary (distinct onsets, so each pair rhymes).
RHYME_POOLS = (
    ("day", "way", "play", "stay", "say", "gray"),
    ("night", "light", "bright", "sight", "flight", "right"),
    ("tune", "moon", "soon", "noon", "spoon", "dune"),
    ("tree", "free", "sea", "knee", "bee", "glee"),
    ("cat", "hat", "bat", "mat", "flat", "sat"),
    ("rain", "train", "plain", "chain", "brain", "lane"),
    ("sky", "fly", "high", "why", "try", "dry"),
)
GIBBERISH = "blorf zindle quarp snib vorp kattle froon gleb wuzzle tib zorp quindle".split()
OFF_TOPIC_VERSE = (
    "The ocean rolls beneath the silver moon\n"
    "The sailors sing a slow and gentle tune\n"
    "The gulls are crying high above the bay\n"
    "And waves will wash the sandy shore away"
)
# The same four lines, ended by words that rhyme (by the CMU dictionary and by spelling) and
# by words that do not: a reward that pays the first more pays rhyme.
LINES = (
    "I walked along the quiet road at",
    "The moon above was shining clear and",
    "The houses slept without a single",
    "And nothing moved as far as any",
)
RHYMED_ENDS = ("night", "bright", "light", "sight")
UNRHYMED_ENDS = ("night", "river", "table", "garden")
PAD_WORDS = 200  # about the default completion limit (256 tokens) in English words


def _verse(ends: Sequence[str]) -> str:
    return "\n".join(f"{line} {end}" for line, end in zip(LINES, ends, strict=True))


def _pair_lines(pool: Sequence[str], lead: Callable[[int], str], n: int) -> str:
    return "\n".join(f"{lead(i)} {pool[i % len(pool)]}".strip() for i in range(n))


def _words(text: str, n: int) -> list[str]:
    words = text.split()
    return (words * (n // max(1, len(words)) + 1))[:n] if words else ["words"] * n


def _topic(row: Row) -> str:
    return " ".join(row.prompt.split()[:4]) or "this"


def _padded(row: Row) -> str:
    """The answer, then its own lines again and again to the length limit."""
    lines = [line for line in row.reference.strip().splitlines() if line.strip()] or ["and"]
    out, words = [], 0
    while words < PAD_WORDS:
        line = lines[len(out) % len(lines)]
        out.append(line)
        words += len(line.split())
    return "\n".join(out)


def _chunks(words: list[str], size: int) -> list[list[str]]:
    return [words[i : i + size] for i in range(0, len(words), size)]


# For every reward (the tool-call and judge batteries take all but the padded answer, which
# theirs already hold in their own form).
DEGENERATE_PROBES: tuple[Probe, ...] = (
    Probe(
        "one_word_lines",
        "rhymes with single words instead of lines",
        "require a few words per line (rhyme: min_words_per_line)",
        lambda row, rng: "\n".join(rng.choice(RHYME_POOLS)[:4]),
    ),
    Probe(
        "same_end_word",
        "ends every line with the same word, which 'rhymes' with itself",
        "a word never rhymes with itself; multiply by the share of distinct end words",
        lambda row, rng: "\n".join(
            f"{lead} {_topic(row).lower()} every day"
            for lead in ("I think about", "I write about", "I sing about", "I dream about")
        ),
    ),
    Probe(
        "repeated_line",
        "writes one line again and again",
        "pay distinct lines only; a repeated line earns nothing twice",
        lambda row, rng: "\n".join([OFF_TOPIC_VERSE.splitlines()[0]] * 4),
    ),
    Probe(
        "padded_to_limit",
        "pads the answer with its own lines to the length limit (cut there in training)",
        "pay a complete answer of the asked length; refuse or discount one cut at the limit",
        lambda row, rng: _padded(row),
        kind="length",
    ),
)

RHYME_PROBES: tuple[Probe, ...] = (
    Probe(
        "one_long_line",
        "writes the answer as one unbroken line",
        "count lines; fewer than two lines scores 0",
        lambda row, rng: " ".join([*row.reference.split(), *rng.choice(RHYME_POOLS)]),
    ),
    Probe(
        "forty_short_lines",
        "pads the answer with forty two-word rhyming lines",
        "require a few words per line; judge the answer, not the padding",
        lambda row, rng: _pair_lines(
            [w for pool in RHYME_POOLS for w in pool], lambda i: "the", 40
        ),
    ),
    Probe(
        "thinking_only",
        "puts the verse in a thinking block and answers nothing",
        "strip <think>...</think> before scoring",
        lambda row, rng: "<think>\n" + OFF_TOPIC_VERSE + "\n</think>",
    ),
    Probe(
        "markdown_bullets",
        "uses list markers as words to pass the words-per-line rule",
        "strip bullets and numbering before counting words",
        lambda row, rng: _pair_lines(rng.choice(RHYME_POOLS), lambda i: "- the", 4),
    ),
    Probe(
        "rhyming_gibberish",
        "rhymes with nonsense around the end words",
        "gate the rhyme on relevance to the reference (rhyme_relevance)",
        lambda row, rng: "\n".join(
            f"{' '.join(rng.sample(GIBBERISH, 3))} the {w}"
            for w in (lambda p: (p[0], p[1], p[2], p[3]))(rng.choice(RHYME_POOLS))
        ),
    ),
    Probe(
        "rhyming_off_topic",
        "writes good verse about something else",
        "gate the rhyme on relevance to the reference (rhyme_relevance)",
        lambda row, rng: OFF_TOPIC_VERSE,
    ),
    Probe(
        "prose_on_topic",
        "answers correctly in prose, without rhyme",
        "pay the rhyme itself, not only relevance",
        lambda row, rng: "\n".join(
            " ".join(chunk) for chunk in _chunks(_words(row.reference, 32), 8)
        ),
        kind="form",
    ),
)


def pays_rhyme(
    reward: Reward, data: Sequence[Row], columns: Mapping[str, list[Any]]
) -> tuple[bool, str]:
    """Whether the reward pays rhymed lines more than the same lines unrhymed, on these rows,
    and the sentence that says what it paid each."""
    prompts = [r.prompt for r in data]
    rhymed = checked_scores(reward, [_verse(RHYMED_ENDS)] * len(data), prompts=prompts, **columns)
    plain = checked_scores(reward, [_verse(UNRHYMED_ENDS)] * len(data), prompts=prompts, **columns)
    paid, unpaid = graded_mean(rhymed.rewards) or 0.0, graded_mean(plain.rewards) or 0.0
    return paid > unpaid + 1e-9, f"rhymed lines {paid:.2f}, the same lines unrhymed {unpaid:.2f}"
