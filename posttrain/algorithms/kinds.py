"""The registry: every algorithm posttrain trains, by the name a spec's algorithm.kind gives.

Everything that depends on the kind asks here (`algorithm_of`) and reads the record; help
texts, the spec's description and the docs' lists are drawn from ALGORITHMS.
"""

from __future__ import annotations

import difflib
from typing import Any

from posttrain.algorithms.algorithm import Algorithm
from posttrain.algorithms.distill import DISTILL
from posttrain.algorithms.dpo import DPO
from posttrain.algorithms.grpo import GRPO
from posttrain.algorithms.kto import KTO
from posttrain.algorithms.sft import SFT

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (GRPO, SFT, DPO, DISTILL, KTO)}
DEFAULT = GRPO


def unknown_kind(kind: str) -> str:
    """The error for a kind no algorithm has, with the nearest name and every kind."""
    known = "; ".join(f"'{a.name}' ({a.summary})" for a in ALGORITHMS.values())
    close = difflib.get_close_matches(kind, list(ALGORITHMS), n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"kind '{kind}' does not exist; {hint}the kinds are: {known}"


def algorithm_of(what: Any) -> Algorithm:
    """The algorithm of a kind's name, an algorithm section, or a whole spec."""
    kind = what if isinstance(what, str) else getattr(what, "kind", None)
    if kind is None:
        kind = what.algorithm.kind
    if kind not in ALGORITHMS:
        raise ValueError(unknown_kind(kind))
    return ALGORITHMS[kind]


def titles() -> str:
    """Every algorithm's title, for help texts: "GRPO, SFT, DPO, distillation and KTO"."""
    names = [a.title for a in ALGORITHMS.values()]
    return ", ".join(names[:-1]) + f" and {names[-1]}"
