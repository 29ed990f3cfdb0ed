"""What a probe is: a response a policy could produce to game a reward, built from a row."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from posttrain.data.toolcalls import Call

# exploit: judged against the honest answers; leak: only matters when prompts hold their
# references; form: the reference itself in another form, judged only against honest answers
# of a different form (--honest-column), never against the references themselves;
# wrong_call: a tool call that is wrong, flagged when the reward pays it more than half its
# range; info: reported with its score, never flagged (a judgement the user makes);
# accepted: the reference in another form, reported as a form the reward accepts or not;
# user: the user's own probe (--probes), flagged when it scores above the most it should;
# judges (rewards/judge/exploits.py): injection, an exploit whose lift over the same answer
# without the instruction is said; bias, the right answer dressed up, flagged when paid more
# than the honest answers; reference, the reference itself, flagged when paid under half;
# length: the answer padded to the length limit, flagged when paid more than the answer alone
ProbeKind = Literal[
    "exploit",
    "leak",
    "form",
    "wrong_call",
    "info",
    "accepted",
    "user",
    "injection",
    "bias",
    "reference",
    "length",
]


@dataclass(frozen=True)
class Row:
    prompt: str
    reference: str  # the honest answer as text (for tool rows: the expected calls, as written)
    columns: Mapping[str, Any]
    calls: tuple[Call, ...] = ()  # tool rows: the expected calls
    tools: tuple[str, ...] = ()  # tool rows: the names of the tools the row offers


@dataclass(frozen=True)
class Probe:
    name: str
    exploit: str  # what a policy producing this would be getting away with
    fix: str  # the rule that stops it
    build: Callable[[Row, random.Random], str]
    kind: ProbeKind = "exploit"
    max_score: float | None = None  # a user probe: the most it should score
    needs_reference: bool = False  # built from the row's reference: skipped on rows without
