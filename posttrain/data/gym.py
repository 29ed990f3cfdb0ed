"""The rhyme gym: a deterministic synthetic task the tiny model can learn on two CPU cores.

Prompts ask for a poem about three topics; answers are four lines of four words, each line
ending in a word from one of twenty rhyme classes (checked against the CMU dictionary by the
tests). The SFT warm-start answers rhyme only `rhyme_share` of the time, so the warm-started
model learns the format but rhymes at about chance; GRPO with the rhyme reward then has
something real to learn. Every GRPO row carries a rhyming `reference` about its topic, which
the relevance reward compares against.

Nothing is downloaded: the vocabulary lives here and the rows come from a seeded generator.
"""

from __future__ import annotations

import random
from typing import Any

# Twenty rhyme classes of short words; within a class every pair rhymes under the rhyme reward
# (different onsets: no "light"/"delight").
RHYME_CLASSES: tuple[tuple[str, ...], ...] = (
    ("day", "way", "play", "stay", "say", "gray", "bay", "ray"),
    ("night", "light", "bright", "sight", "flight", "fight"),
    ("moon", "tune", "soon", "noon", "spoon", "dune"),
    ("tree", "free", "sea", "knee", "bee", "key"),
    ("cat", "hat", "bat", "mat", "flat", "rat"),
    ("rain", "train", "plain", "chain", "brain", "pain"),
    ("sky", "fly", "high", "why", "try", "dry"),
    ("fire", "wire", "tire", "choir", "higher", "liar"),
    ("door", "more", "floor", "shore", "core", "four"),
    ("bed", "red", "head", "bread", "fed", "led"),
    ("cold", "gold", "old", "bold", "hold", "told"),
    ("snow", "glow", "slow", "grow", "show", "flow"),
    ("star", "far", "car", "jar", "bar", "scar"),
    ("song", "long", "strong", "wrong", "throng", "gong"),
    ("heart", "start", "part", "art", "smart", "cart"),
    ("ring", "sing", "king", "bring", "wing", "thing"),
    ("cake", "lake", "make", "take", "wake", "snake"),
    ("blue", "true", "new", "through", "few", "grew"),
    ("name", "game", "same", "came", "flame", "frame"),
    ("hill", "still", "will", "fill", "mill", "chill"),
)
FILLERS: tuple[str, ...] = tuple(
    "the a and with in on of to my your our we they it is was can see feel love find keep "
    "hear dream walk run under over all every soft warm dark deep green wild sweet little "
    "great quiet gentle near from by so".split()
)
TOPICS: tuple[str, ...] = tuple(
    "ocean forest river mountain garden city winter summer autumn morning evening village "
    "desert island meadow harbor valley castle market kitchen library school bridge candle "
    "window kitten puppy rainbow thunder sunrise".split()
)
PROMPT_WORDS: tuple[str, ...] = ("write", "poem", "about")
SYSTEM_PROMPT = "answer in rhyme"
LINES = 4
WORDS_PER_LINE = 4  # a topic and fillers, then the end word


def vocabulary() -> list[str]:
    """Every word the gym uses, in a fixed order (the tiny tokenizer's vocabulary)."""
    words = [w for cls in RHYME_CLASSES for w in cls]
    words += [
        *FILLERS,
        *TOPICS,
        *PROMPT_WORDS,
        *SYSTEM_PROMPT.split(),
        "user",
        "assistant",
        "system",
    ]
    return list(dict.fromkeys(words))


def prompt_text(topics: tuple[str, ...] | str) -> str:
    """'write a poem about the ocean the forest and the river' (three topics, or one)."""
    if isinstance(topics, str):
        return f"write a poem about the {topics}"
    *first, last = topics
    return "write a poem about " + " ".join(f"the {t}" for t in first) + f" and the {last}"


def pick_topics(rng: random.Random) -> tuple[str, str, str]:
    """Three distinct topics: 24,360 ordered triples, so held-out prompts are new prompts."""
    a, b, c = rng.sample(TOPICS, 3)
    return a, b, c


def verse(topics: tuple[str, ...], rng: random.Random, rhyming: bool) -> str:
    """Four lines of four words; the topics lead lines one to three; AABB when rhyming."""
    if rhyming:
        a, b = rng.sample(RHYME_CLASSES, 2)
        ends = [*rng.sample(a, 2), *rng.sample(b, 2)]
    else:
        classes = rng.sample(RHYME_CLASSES, LINES)  # one word from each of four classes
        ends = [rng.choice(cls) for cls in classes]
    lines = []
    for i, end in enumerate(ends):
        if i == 0:
            body = ["the", topics[0], rng.choice(FILLERS)]
        elif i < len(topics):
            body = [rng.choice(FILLERS), topics[i], rng.choice(FILLERS)]
        else:
            body = [rng.choice(FILLERS) for _ in range(WORDS_PER_LINE - 1)]
        lines.append(" ".join([*body, end]))
    return "\n".join(lines)


def rows(n: int, seed: int = 0, rhyme_share: float = 0.3) -> list[dict[str, Any]]:
    """The builtin `rhyme-gym` dataset: a prompt naming three topics, a rhyming `reference`
    about them (what the reward compares against) and a `response` that rhymes only
    `rhyme_share` of the time (the SFT warm-start target)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topics = pick_topics(rng)
        out.append(
            {
                "id": f"gym-{i}",
                "prompt": prompt_text(topics),
                "topics": " ".join(topics),
                "reference": verse(topics, rng, rhyming=True),
                "response": verse(topics, rng, rhyming=rng.random() < rhyme_share),
            }
        )
    return out
