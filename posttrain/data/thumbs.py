"""Thumbs-up/down feedback, the data KTO learns from: reading a label as a product wrote it,
and the flags `data check` raises on a file of such rows.

Products store a rating in many spellings (a bool, 1/0, "up", "good", 👍 with a skin tone,
Slack's ":+1:"). Each is read here into True (desirable), False (undesirable) or None (cannot
be read: `data check` names the row and the value, and the trainer refuses it, since guessing a
label would teach the opposite of what the rater meant).

KTO weighs each answer against a reference point on its own, so it needs both sides, and it
sums the losses of each side: with far more of one, that side dominates. TRL's KTOTrainer
(trl/trainer/kto_trainer.py, `_prepare_dataset`) recommends, from eq. (8) of the KTO paper,
weights that keep desirable_weight x desirable / (undesirable_weight x undesirable) within
[1, 4/3]; `balancing` gives that range and the value to write in the spec.

Pure Python: imports nothing of the project (the flags read plain records, not messages).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DESIRABLE = frozenset(
    {"true", "t", "1", "+1", "yes", "y", "up", "good", "positive", "pos", "desirable",
     "thumbsup", "like", "liked", "accept", "accepted", "chosen", "👍"}
)  # fmt: skip
UNDESIRABLE = frozenset(
    {"false", "f", "0", "-1", "no", "n", "down", "bad", "negative", "neg", "undesirable",
     "thumbsdown", "dislike", "disliked", "reject", "rejected", "👎"}
)  # fmt: skip
ACCEPTED = "true/false, 1/0, up/down, good/bad, yes/no, 👍/👎 (or thumbs_up/thumbs_down)"
# The paper's range for desirable_weight x desirable / (undesirable_weight x undesirable),
# as TRL checks it (its bounds are rounded to 2 decimals, and so are ours)
RATIO_LOW, RATIO_HIGH = 1.0, 1.33
STRONG_IMBALANCE = 1.5  # majority:minority at which the imbalance is flagged (60%/40%)
ROWS_NAMED = 5  # rows a flag names before it says "..."
EXAMPLE_CHARS = 40
# skin tones and the emoji variation selector: 👍🏽 and 👍️ are 👍
_EMOJI_MODIFIERS = dict.fromkeys([*range(0x1F3FB, 0x1F400), 0xFE0F])


def parse_label(value: Any) -> bool | None:
    """True for a desirable answer, False for an undesirable one, None when the value is none
    of the accepted forms (ACCEPTED), case and spacing aside: 'Thumbs Up', ':thumbsup:',
    '👍🏽', 1.0 and True all read True."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return {1: True, 0: False, -1: False}.get(value) if value == int(value) else None
    if not isinstance(value, str):
        return None
    raw = unicodedata.normalize("NFC", value).translate(_EMOJI_MODIFIERS).strip().lower()
    raw = raw.strip(":").strip()
    if raw in ("-1", "-1.0"):  # the dash is a sign here, not a separator
        return False
    word = raw.replace("_", "").replace("-", "").replace(" ", "")
    if word in DESIRABLE:
        return True
    if word in UNDESIRABLE:
        return False
    try:
        return parse_label(float(word)) if word else None  # "1.0", "0.0"
    except ValueError:
        return None


@dataclass(frozen=True)
class Feedback:
    """One row as the flags read it: its id, the answer as text, the label read from the
    row (None: unreadable) and the value the row holds."""

    id: str
    answer: str
    label: bool | None
    value: Any
    prompt: str = ""  # its prompt as text: a row without an id column is found by it


@dataclass(frozen=True)
class Balance:
    """TRL's recommended weights for these counts: either desirable_weight within
    `desirable_range` or undesirable_weight within `undesirable_range`, not both."""

    desirable: int
    undesirable: int
    desirable_range: tuple[float, float]
    undesirable_range: tuple[float, float]
    in_range: bool  # the weights given already satisfy one of the two

    @property
    def suggestion(self) -> tuple[str, float]:
        """The weight of the smaller side raised to balance the two exactly (ratio 1)."""
        if self.desirable < self.undesirable:
            return "desirable_weight", self.desirable_range[0]
        return "undesirable_weight", self.undesirable_range[1]


def balancing(
    desirable: int, undesirable: int, desirable_weight: float = 1.0, undesirable_weight: float = 1.0
) -> Balance:
    """TRL's check, in its own arithmetic (counts of at least 1, bounds rounded to 2 places)."""
    d, u = max(desirable, 1), max(undesirable, 1)
    d_range = (round(u * undesirable_weight / d * RATIO_LOW, 2),
               round(u * undesirable_weight / d * RATIO_HIGH, 2))  # fmt: skip
    u_range = (round(d * desirable_weight / u / RATIO_HIGH, 2),
               round(d * desirable_weight / u / RATIO_LOW, 2))  # fmt: skip
    ok = (d_range[0] <= desirable_weight <= d_range[1]) or (
        u_range[0] <= undesirable_weight <= u_range[1]
    )
    return Balance(desirable, undesirable, d_range, u_range, ok or desirable == undesirable)


def _named(rows: Sequence[Feedback]) -> str:
    names = ", ".join(_one(r) for r in rows[:ROWS_NAMED])
    return names + (", ..." if len(rows) > ROWS_NAMED else "")


def _one(row: Feedback) -> str:
    """A row's id, with the start of its prompt: ids a file does not carry are hashes."""
    prompt = " ".join(row.prompt.split())
    if not prompt:
        return repr(row.id)
    shown = prompt if len(prompt) <= EXAMPLE_CHARS else prompt[:EXAMPLE_CHARS] + "..."
    return f"{row.id!r} ({shown!r})"


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + "...'"


def thumbs_flags(
    rows: Sequence[Feedback],
    label_column: str,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
) -> list[str]:
    """The flags of a file of thumbs rows: empty answers, labels that cannot be read, one side
    only, and an imbalance the weights do not correct (with the weights that would)."""
    total = len(rows)
    if not total:
        return []
    flags = []
    empty = [r for r in rows if not r.answer.strip()]
    if empty:
        flags.append(
            f"{len(empty)} of {total} rows have an empty answer (rows {_named(empty)}): KTO "
            f"would train on the end-of-turn token alone, so an empty 👍 teaches the model to "
            f"answer nothing; fill them or drop them with dataset.filters"
        )
    unread = [r for r in rows if r.label is None]
    if unread:
        said = "; ".join(f"row {_one(r)}: {_value(r.value)}" for r in unread[:ROWS_NAMED])
        more = "; ..." if len(unread) > ROWS_NAMED else ""
        flags.append(
            f"{len(unread)} of {total} rows have a label in column '{label_column}' that "
            f"cannot be read ({said}{more}); the trainer refuses them. Write one of {ACCEPTED}, "
            f"or drop them with dataset.filters"
        )
    up = sum(r.label is True for r in rows)
    down = sum(r.label is False for r in rows)
    if up + down and not (up and down):
        side, other = ("desirable (👍)", "undesirable") if up else ("undesirable (👎)", "desirable")
        advice = (
            "for desirable answers alone, SFT on them (algorithm.kind: sft) is the plainer choice"
            if up
            else "with undesirable answers alone, TRL advises a conservative learning rate"
        )
        flags.append(
            f"one-sided data: all {up + down} readable labels are {side}. KTO weighs each "
            f"answer against a reference point and is built for both sides; add {other} "
            f"examples, or: {advice}"
        )
    elif up and down:
        flags += _imbalance(balancing(up, down, desirable_weight, undesirable_weight))
    return flags


def _imbalance(balance: Balance) -> list[str]:
    d, u = balance.desirable, balance.undesirable
    if balance.in_range or max(d, u) < STRONG_IMBALANCE * min(d, u):
        return []
    name, value = balance.suggestion
    lo_d, hi_d = balance.desirable_range
    lo_u, hi_u = balance.undesirable_range
    return [
        f"strong imbalance: {d} desirable to {u} undesirable answers "
        f"({max(d, u) / min(d, u):.1f}:1); KTO sums each side's losses, so the larger side "
        f"dominates. TRL recommends (KTO paper, eq. 8) desirable_weight x desirable / "
        f"(undesirable_weight x undesirable) within [1, 4/3]: set `algorithm.kto.{name}: "
        f"{value:g}` (desirable_weight within [{lo_d:g}, {hi_d:g}] or undesirable_weight "
        f"within [{lo_u:g}, {hi_u:g}], not both)"
    ]
