"""Even samples: which rows to look at when there are too many to look at all.

Light on purpose (the standard library only): check_dataset runs in the server, which must
start without the trainer's libraries, and the trainer's reporter samples traces the same way.
"""

from __future__ import annotations


def spread(n: int, k: int) -> list[int]:
    """k indices spread evenly over range(n): samples from different prompts and groups."""
    if k >= n:
        return list(range(n))
    return sorted({round(i * n / k) for i in range(k)})
