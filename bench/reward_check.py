"""`reward check` on 200 rows with every probe: how long a check of a rule reward takes.

A rule reward of an arithmetic task (a user's file, scored in its isolated child process
as any user reward is) and the built-in `rhyme` on the bundled rhyme examples (their 12 rows
repeated to the same count), each timed
end to end through posttrain.tools.reward_check.check_reward (reading the file, building
the probes from the rows, scoring honest answers and every probe). Goal: under 10 s on this
machine for a rule reward.

    python bench/reward_check.py [--rows 200] [--repeat 3]

Measured 2026-12-04, 2 cores of an AMD EPYC, other work running beside it:

    rule reward (user file): 200 rows x 16 probes, median 0.22 s (runs 0.22, 0.22, 0.22)
    rhyme (built-in): 200 rows x 24 probes, median 0.06 s (runs 0.12, 0.05, 0.06)

Far under the 10 s goal: a rule reward scores the 200 x 17 completions (honest answers and
16 probes) in milliseconds, and the rest is the child process and reading the file.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAST_NUMBER = """
import re
def score(completions, total, **kw):
    out = []
    for c, t in zip(completions, total):
        found = re.findall(r"-?\\d+", c)
        out.append(1.0 if found and found[-1] == t else 0.0)
    return out
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from posttrain.tools.reward_check import check_reward

    folder = Path(tempfile.mkdtemp(prefix="posttrain-reward-bench-"))
    rng = random.Random(0)
    with open(folder / "sums.jsonl", "w") as f:
        for _ in range(args.rows):
            a, b = rng.randint(3, 95), rng.randint(3, 95)
            f.write(json.dumps({"problem": f"{a} plus {b}?", "total": str(a + b)}) + "\n")
    (folder / "last_number.py").write_text(LAST_NUMBER)
    examples = (ROOT / "examples" / "rhyme_qa.jsonl").read_text().splitlines()
    with open(folder / "rhyme.jsonl", "w") as f:
        f.write("\n".join(examples[i % len(examples)] for i in range(args.rows)) + "\n")
    cases = [
        ("rule reward (user file)", f"{folder / 'last_number.py'}:score", folder / "sums.jsonl",
         "problem", "total"),
        ("rhyme (built-in)", "rhyme", folder / "rhyme.jsonl", "prompt", None),
    ]  # fmt: skip
    for label, reward, data, prompt, reference in cases:
        times, report = [], None
        for _ in range(args.repeat):
            t = time.perf_counter()
            report = check_reward(
                reward, data=str(data), prompt_column=prompt, reference_column=reference,
                rows=args.rows,
            )  # fmt: skip
            times.append(time.perf_counter() - t)
        print(
            f"{label}: {report.rows} rows x {len(report.probes)} probes, median "
            f"{statistics.median(times):.2f} s (runs {', '.join(f'{x:.2f}' for x in times)}); "
            f"flagged {report.flagged}"
        )


if __name__ == "__main__":
    main()
