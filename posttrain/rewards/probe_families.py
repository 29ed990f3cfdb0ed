"""Probe families, and which of them a reward meets: by what it can pay for, not by its name.

A user's reward file says nothing about what it pays, so it is asked: the rhyme family runs
when it pays rhymed lines more than the same lines unrhymed (or when the reward is one of the
rhyme world's, or the caller names the family). The generic family (empty, echoed and
degenerate answers) runs for every reward; the tool family where the rows expect tool calls;
the judge's own battery for a judge. The families that do not run are said in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.rewards.base import Reward
from posttrain.rewards.judge.exploits import judge_probes
from posttrain.rewards.probe_types import Probe, Row
from posttrain.rewards.rhyme_probes import DEGENERATE_PROBES, RHYME_PROBES, pays_rhyme
from posttrain.rewards.row_probes import row_probes
from posttrain.rewards.tool_probes import TOOL_PROBES

FAMILIES: dict[str, str] = {
    "generic": "empty, blank, echoed and degenerate answers (always run)",
    "answer": "the answer buried, listed, retracted, hedged, padded, cut (rows with answers)",
    "rhyme": "the rhyme world's: rhyming gibberish, good verse off the topic, prose on it",
    "format": "the answer's shape: one long line, forty short lines, a thinking block only, "
    "list markers as words (with the rhyme family, or named)",
    "tool": "wrong tool calls (rows whose reference holds a call)",
    "judge": "an injected instruction, flattery, padding (a judge)",
}
RHYME_REWARDS = ("rhyme", "relevance", "rhyme_relevance")  # the rhyme world's own rewards

BASIC_PROBES: tuple[Probe, ...] = (
    Probe(
        "empty", "scores with no answer at all", "score an empty response 0", lambda row, rng: ""
    ),
    Probe(
        "whitespace",
        "scores with blank lines only",
        "strip whitespace before scoring",
        lambda row, rng: "   \n\t\n   \n",
    ),
    Probe(
        "prompt_copy",
        "echoes the question back",
        "compare with the reference, not the prompt",
        lambda row, rng: row.prompt,
    ),
    Probe(
        "reference_copy",
        "copies the reference answer verbatim (possible only if it leaks into the prompt)",
        "keep references out of prompts; compare paraphrase, not identity",
        lambda row, rng: row.reference,
        kind="leak",
    ),
)
PROBES: tuple[Probe, ...] = (*BASIC_PROBES, *DEGENERATE_PROBES, *RHYME_PROBES)  # for text
FORMAT_NAMES = ("one_long_line", "forty_short_lines", "thinking_only", "markdown_bullets")
FORMAT_PROBES = tuple(p for p in RHYME_PROBES if p.name in FORMAT_NAMES)
RHYME_ONLY = tuple(p for p in RHYME_PROBES if p.name not in FORMAT_NAMES)
# The degenerate answers for the batteries that hold their own empty and padded answers.
DEGENERATE_SHORT = tuple(p for p in DEGENERATE_PROBES if p.kind != "length")


def parse_families(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The families a caller names ("rhyme,answer" or a list); None: choose by the reward."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise ConfigError(
            f"families: {unknown or 'none given'} is not a probe family; name one or more of "
            f"{list(FAMILIES)}, separated by commas (e.g. --families rhyme,format), or leave it "
            f"out to choose by what the reward pays"
        )
    return tuple(dict.fromkeys(names))


@dataclass
class Battery:
    """The probes to score, each with its family, and the families left out with why."""

    probes: list[tuple[str, Probe]] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)

    def add(self, family: str, probes: Sequence[Probe]) -> None:
        self.probes.extend((family, p) for p in probes)

    @property
    def run(self) -> list[str]:
        return list(dict.fromkeys(f for f, _ in self.probes))

    def line(self) -> str | None:
        """The families not run, in one line of the report."""
        if not self.not_run:
            return None
        said = "; ".join(f"{name} ({why})" for name, why in self.not_run.items())
        return f"probe families not run: {said}. --families names the ones to run"


def choose(
    reward: Reward,
    data: Sequence[Row],
    columns: Mapping[str, list[Any]],
    *,
    tools: bool,
    named: tuple[str, ...] | None,
) -> Battery:
    """The battery for this reward on these rows (`tools`: the rows expect tool calls)."""
    battery = Battery()
    wanted = set(named or ())
    if tools:
        battery.add("tool", TOOL_PROBES)
        battery.add("generic", DEGENERATE_SHORT)
        for name in ("answer", "rhyme", "format"):
            battery.not_run[name] = "the rows expect tool calls; the tool family probes them"
    elif reward.judged:  # each probe costs a judge call a row: the judge's own battery
        references = any(r.reference.strip() for r in data)
        judged = judge_probes(data)
        battery.add("judge", [p for p in judged if references or not p.needs_reference])
        battery.add("generic", DEGENERATE_SHORT)
        if not references:
            skipped = [p.name for p in judged if p.needs_reference]
            battery.not_run["judge, in part"] = (
                f"the rows have no reference answer, so {', '.join(skipped)} are skipped"
            )
        shown = {"rhyme": RHYME_ONLY, "format": FORMAT_PROBES}
        for name in ("answer", "rhyme", "format"):  # each costs a call a row: only when named
            if name in wanted:
                battery.add(name, row_probes(data) if name == "answer" else shown[name])
            else:
                battery.not_run[name] = "a judge is probed with its own battery, call by call"
    else:
        battery.add("generic", (*BASIC_PROBES, *DEGENERATE_PROBES))
        if named is None or "answer" in wanted:
            battery.add("answer", row_probes(data))
        else:
            battery.not_run["answer"] = "not named"
        rhymes, said = (True, "") if "rhyme" in wanted else (False, "not named")
        if named is None:
            rhymes = reward.name in RHYME_REWARDS
            if not rhymes:
                rhymes, said = pays_rhyme(reward, data, columns)
                said = f"the reward does not pay rhyme: {said}"
        if rhymes:
            battery.add("rhyme", RHYME_ONLY)
        else:
            battery.not_run["rhyme"] = said
        if (rhymes and named is None) or "format" in wanted:  # verse's shapes, or named
            battery.add("format", FORMAT_PROBES)
        else:
            battery.not_run["format"] = (
                f"verse's shapes, run with rhyme: {said}" if named is None else "not named"
            )
    if not tools:
        battery.not_run["tool"] = "no row's reference holds a tool call"
    if not reward.judged:
        battery.not_run["judge"] = "the reward is no judge"
    for name in wanted - set(battery.run) - {"generic"}:
        battery.not_run.setdefault(name, "does not apply here")
    return battery
