"""The probe battery: responses a policy could use to game a reward, scored beside honest ones.

Before a reward meets a GPU, score the cheap ways up it: empty answers, one-word lines, the
same end word again and again, the prompt copied back, rhyming gibberish... Any probe that
scores about as high as the honest answers is flagged as a likely exploit, with its example,
the rule it slips through and the rule that would stop it. The honest answers' own
distribution is checked too: an all-zero, all-one or constant reward usually reads the wrong
field.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.formatting import cut
from posttrain.rewards.base import Reward, graded_mean
from posttrain.rewards.guards import checked_scores, reward_label
from posttrain.rewards.probe_families import PROBES, choose, parse_families
from posttrain.rewards.probe_types import Probe, Row
from posttrain.rewards.row_probes import label_set, user_probe
from posttrain.rewards.tool_probes import tool_rows

FLAG_MARGIN = 0.1  # a probe within 10% of the honest mean (above the floor) is flagged
# Honest answers scoring under half of the reward's range are not what it pays for (prose
# references under a rhyme reward): probes are then judged against the range itself, and a
# probe scoring at least half of it is flagged.
WEAK_HONEST_SHARE = 0.5
EXAMPLE_CHARS = 400
EXAMPLE_TAIL = 80  # of them, the end: what a probe ends with is often its point
__all__ = ["PROBES", "Distribution", "ProbeReport", "ProbeResult", "run_probes"]


@dataclass
class Distribution:
    n: int
    mean: float
    std: float
    min: float
    max: float
    degenerate: str | None = None  # "all zero", "all one", "constant" or None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Distribution:
        values = [v for v in values if v is not None] or [0.0]  # a judge's ungraded left out
        n = len(values)
        mean = statistics.fmean(values)
        std = statistics.pstdev(values) if n > 1 else 0.0
        lo, hi = min(values), max(values)
        degenerate = None
        if all(v == 0 for v in values):
            degenerate = "all zero"
        elif all(v == 1 for v in values):
            degenerate = "all one"
        elif n > 1 and hi - lo < 1e-9:
            degenerate = "constant"
        return cls(n, mean, std, lo, hi, degenerate)


@dataclass
class ProbeResult:
    name: str
    mean: float
    max: float
    flagged: bool
    verdict: str  # one sentence a person or agent can act on
    example: str
    example_score: float
    example_components: dict[str, float] = field(default_factory=dict)
    family: str = ""  # the probe family it belongs to (probe_families.FAMILIES), or "user"


@dataclass
class ProbeReport:
    reward: str
    rows: int
    honest_source: str
    honest: Distribution
    probes: list[ProbeResult]
    warnings: list[str]
    notes: list[str]
    families: list[str] = field(default_factory=list)  # the families run
    families_not_run: dict[str, str] = field(default_factory=dict)  # family: why not

    @property
    def flagged(self) -> list[str]:
        return [p.name for p in self.probes if p.flagged]

    @property
    def accepted(self) -> list[str]:
        """The reference's other forms that the reward pays as well as honest answers."""
        return [p.name for p in self.probes if p.verdict.startswith("accepted form")]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flagged": self.flagged, "accepted": self.accepted}


DEGENERATE_HINTS = {
    "all zero": "every honest answer scores 0: the reward probably reads the wrong field "
    "(a column name, or the completion's shape), or the honest answers are not what it pays",
    "all one": "every honest answer scores 1: the reward cannot tell answers apart, so it "
    "gives GRPO no signal; check it reads the completion and not a constant",
    "constant": "every honest answer scores the same: GRPO learns nothing from a constant "
    "reward; check the reward reads the field you think it does",
}


def run_probes(
    reward: Reward,
    rows: Sequence[Mapping[str, Any]],
    *,
    prompt_column: str = "prompt",
    reference_column: str | None = None,
    honest_column: str | None = None,
    max_rows: int = 32,
    seed: int = 0,
    user_probes: Sequence[Mapping[str, Any]] = (),
    families: str | Sequence[str] | None = None,
) -> ProbeReport:
    """Score every probe on up to `max_rows` rows beside the honest answers and flag exploits.

    Honest answers come from `honest_column` when given (e.g. verse that answers the question),
    else from the reference column. The reference column defaults to the first column the
    reward needs, else "reference" (a judge needs none: rows without it skip the probes built
    from it). The battery: the families `families` names, else those the reward can pay
    (probe_families.choose), then the user's own (`user_probes`: {name, completion,
    max_score}, see row_probes.user_probe).
    """
    if not rows:
        raise ConfigError("the probe battery needs at least one dataset row; the data is empty")
    reference_column = reference_column or (reward.columns[:1] or ("reference",))[0]
    picked = list(rows[:max_rows])
    needed = [c for c in reward.columns if picked and c not in picked[0]]
    if needed:  # before any probe: the reward would fail on every one of them
        raise ConfigError(
            f"reward '{reward_label(reward)}' needs the dataset column(s) {needed}, which the "
            f"data lacks (columns: {sorted(picked[0])}); rename the column in the data, or "
            f"the reward's parameter to the column's name"
        )
    # a judge needs no reference: rows without one are probed by what a judge can be told
    unreferenced = reward.judged and not any(reference_column in r for r in picked)
    for column in {prompt_column, reference_column, honest_column or reference_column}:
        missing = [i for i, r in enumerate(picked) if column not in r]
        if missing and not (unreferenced and column == reference_column):
            raise ConfigError(
                f"dataset column '{column}' is missing from row {missing[0]} (columns there: "
                f"{sorted(picked[missing[0]])}); name the right column with --prompt-column, "
                f"--reference-column or --honest-column"
            )
    notes: list[str] = []
    tools = tool_rows(reward, picked, prompt_column, reference_column)
    if tools is not None:  # a tool-call check: honest answers are the expected calls, written
        data, skipped = tools
        if not data:
            raise ConfigError(
                f"no row's '{reference_column}' holds a tool call to probe; name the column of "
                f"expected calls with --reference-column (or the reward's label_column)"
            )
        if skipped:
            notes.append(f"{skipped} row(s) expect no call; the tool-call probes skip them")
    else:
        data = [
            Row(str(r[prompt_column]), str(r.get(reference_column, "") or ""), r) for r in picked
        ]
    columns = {k: [r.columns.get(k) for r in data] for k in _all_keys(data)}
    chosen = choose(reward, data, columns, tools=tools is not None, named=parse_families(families))
    battery = [*chosen.probes, *(("user", user_probe(p)) for p in user_probes)]
    if line := chosen.line():
        notes.append(line)
    prompts = [r.prompt for r in data]
    low, high_end = reward.value_range
    if unreferenced and honest_column is None:  # nothing honest to score: half the range
        honest_scores = None
        honest = Distribution(0, 0.0, 0.0, 0.0, 0.0)
        floor = low if low > float("-inf") else 0.0
    else:
        honest_texts = [
            str(r.columns[honest_column]) if honest_column else r.reference for r in data
        ]
        honest_scores = checked_scores(reward, honest_texts, prompts=prompts, **columns)
        honest = Distribution.of(honest_scores.rewards)
        notes = list(dict.fromkeys([*notes, *honest_scores.notes]))
        floor = low if low > float("-inf") else honest.min
    threshold = honest.mean - FLAG_MARGIN * (honest.mean - floor)
    against = f"honest {honest.mean:.2f}"
    weak_at = floor + WEAK_HONEST_SHARE * (high_end - floor)
    if honest_scores is None:
        threshold, against = weak_at, f"half the range {weak_at:.2f}"
        notes.append(
            f"the rows have no '{reference_column}' column: a judge needs none, but there are "
            f"no honest answers to compare with, so probes are judged against half the "
            f"reward's range ({weak_at:.2f}); give --honest-column for a sharper check"
        )
    elif honest_column is None and high_end < float("inf") and honest.mean < weak_at:
        threshold, against = weak_at, f"the flag line {weak_at:.2f}"
        notes.append(
            f"the honest answers (column '{reference_column}') score {honest.mean:.2f} of the "
            f"reward's range {floor:g}..{high_end:g}: they are not what this reward pays for "
            f"(e.g. prose references under a rhyme reward), so probes are judged against the "
            f"range instead (flagged at {weak_at:.2f}, half of it). Give honest answers in "
            f"the form you train for (--honest-column, e.g. verse) for a sharper check"
        )
    leaks, options = _leaks(data)
    if options:
        notes.append(
            f"the prompts list every answer ({', '.join(options)}): a copy of the right one "
            f"is the task, not a leak"
        )

    results = []
    every_score = list(honest_scores.rewards) if honest_scores else []
    rng = random.Random(seed)
    scored = []
    for family, probe in battery:
        texts = [probe.build(r, rng) for r in data]
        scores = checked_scores(reward, texts, prompts=prompts, **columns)
        notes.extend(n for n in scores.notes if n not in notes)
        every_score += scores.rewards
        scored.append((family, probe, texts, scores))
    if low == float("-inf"):  # no declared range: the lowest score any response got
        floor = min(every_score)
        threshold = honest.mean - FLAG_MARGIN * (honest.mean - floor)
    means = {probe.name: graded_mean(scores.rewards) or 0.0 for _, probe, _, scores in scored}
    for family, probe, texts, scores in scored:
        mean = means[probe.name]
        best = max(range(len(texts)), key=lambda i: scores.rewards[i] or 0.0)
        high = mean > floor + 1e-9 and mean >= threshold
        line = against
        if probe.kind in ("bias", "length") and honest_scores is not None:
            # paid more than the honest answers it dresses up or pads
            bias_at = honest.mean + FLAG_MARGIN * (high_end - floor)
            high, line = (
                mean > bias_at + 1e-9,
                f"honest {honest.mean:.2f} (+{bias_at - honest.mean:.2f})",
            )
        if probe.kind == "reference":  # a judge that cannot pay the reference
            high, line = mean < weak_at - 1e-9, f"half the range {weak_at:.2f}"
        if probe.kind == "injection":
            line = f"{against}; the same wrong answer without it {means.get('off_topic', 0):.2f}"
        if probe.kind == "wrong_call" and high_end < float("inf"):  # more than half is paid
            high, line = mean > weak_at + 1e-9, f"half the range {weak_at:.2f}"
        if probe.kind == "user" and probe.max_score is not None:  # the user said what it may
            high, line = (
                mean > probe.max_score + 1e-9,
                f"the most it should score, {probe.max_score:g}",
            )
        fix = _fix_for(probe.fix, reward.name)
        flagged, verdict = _judge(probe, mean, high, line, leaks, len(data), honest_column, fix)
        example = texts[best]
        results.append(
            ProbeResult(
                name=probe.name,
                family=family,
                mean=mean,
                max=scores.rewards[best] or 0.0,
                flagged=flagged,
                verdict=verdict,
                example=cut(example, EXAMPLE_CHARS, tail=EXAMPLE_TAIL),
                example_score=scores.rewards[best] or 0.0,
                example_components=scores.row(best),
            )
        )

    # Degenerate on everything (honest and probes alike) means the reward ignores the response.
    # Honest answers that all score 0 mean it does not pay what it should. A curated honest set
    # that all scores the maximum is fine, as long as the probes score lower.
    warnings = []
    overall = Distribution.of(every_score).degenerate
    if overall:
        warnings.append(
            f"{overall} on every response, honest and probe alike: {DEGENERATE_HINTS[overall]}"
        )
    elif honest.degenerate == "all zero":
        warnings.append(f"honest answers {honest.degenerate}: {DEGENERATE_HINTS['all zero']}")
    elif honest.degenerate:
        notes.append(
            f"honest answers score {honest.degenerate} ({honest.mean:.2f}): fine for curated "
            f"exemplars, but GRPO needs different scores among a prompt's samples"
        )
    flagged = [p.name for p in results if p.flagged]
    if flagged:
        compared = "honest answers" if honest_scores is not None else "half the reward's range"
        warnings.append(f"{len(flagged)} probe(s) score as high as {compared}: {flagged}")
    return ProbeReport(
        reward=reward_label(reward),
        rows=len(data),
        honest_source=f"column '{honest_column or reference_column}'"
        if honest_scores is not None
        else f"none: the rows have no '{reference_column}' column",
        honest=honest,
        probes=results,
        warnings=warnings,
        notes=notes,
        families=chosen.run,
        families_not_run=chosen.not_run,
    )


def _leaks(data: Sequence[Row]) -> tuple[int, list[str]]:
    """The rows whose prompt holds their reference, and the label set when every such prompt
    lists all the labels ("positive or negative: ...": the question names every answer, so
    holding the right one tells nothing). A leak is a prompt that gives its answer away."""
    holding = [r for r in data if r.reference.strip() and r.reference.strip() in r.prompt]
    labels = sorted(label_set(data))
    if holding and labels and all(_names_all(r.prompt, labels) for r in holding):
        return 0, labels
    return len(holding), []


def _names_all(prompt: str, labels: list[str]) -> bool:
    return all(re.search(rf"(?<!\w){re.escape(label)}(?!\w)", prompt) for label in labels)


def _judge(
    probe: Probe,
    mean: float,
    high: bool,
    against: str,
    leaks: int,
    rows: int,
    honest_column: str | None,
    fix: str,
) -> tuple[bool, str]:
    """Whether a probe is flagged, and the sentence that says why (or why not); `fix` is
    the probe's fix as `_fix_for` words it for the reward under test."""
    if probe.kind == "leak":
        if high and leaks:
            return True, (
                f"LEAK: {leaks} prompt(s) contain their reference and the reward pays a copy "
                f"{mean:.2f}; {fix}"
            )
        if high:
            return False, (
                f"pays a verbatim copy {mean:.2f}; safe while references stay out of prompts "
                f"(none of these {rows} rows leaks)"
            )
        return False, f"ok: a verbatim copy scores {mean:.2f} vs {against}"
    if probe.kind == "info":
        return False, f"reported, not judged: scores {mean:.2f} vs {against}; {fix}"
    if probe.kind == "injection":
        if high:
            return True, f"JUDGE FOOLED: {probe.exploit} scores {mean:.2f} vs {against}; fix: {fix}"
        return False, f"ok: the injected instruction scores {mean:.2f} vs {against}"
    if probe.kind == "length":
        if high:
            return True, (
                f"PAYS PADDING: {probe.exploit}, and scores {mean:.2f}, above {against}; fix: {fix}"
            )
        return False, f"ok: padded to the limit, it scores {mean:.2f} vs {against}"
    if probe.kind == "bias":
        if high:
            return (
                True,
                f"JUDGE BIASED: {probe.exploit} scores {mean:.2f}, above {against}; fix: {fix}",
            )
        return False, f"ok: {probe.exploit} scores {mean:.2f} vs {against}"
    if probe.kind == "reference":
        if high:
            return (
                True,
                f"JUDGE MISSES THE ANSWER: {probe.exploit} scores {mean:.2f}, under "
                f"{against}; fix: {fix}",
            )
        return False, f"ok: the reference scores {mean:.2f} (at least {against})"
    if probe.kind == "accepted":
        if high:
            return False, f"accepted form: {probe.exploit} scores {mean:.2f} vs {against}"
        return False, f"not accepted: {probe.exploit} scores {mean:.2f} vs {against}"
    if probe.kind == "user":
        if high:
            return True, f"YOUR PROBE PAYS: '{probe.name}' scores {mean:.2f}, above {against}"
        return False, f"ok: your probe scores {mean:.2f}, within {against}"
    if probe.kind == "wrong_call":
        if high:
            return True, (
                f"PAYS A WRONG CALL: {probe.exploit}, and scores {mean:.2f} vs {against}; "
                f"fix: {fix}"
            )
        return False, f"ok: a wrong call, paid {mean:.2f} vs {against}"
    if probe.kind == "form" and honest_column is None:
        return False, (
            f"not judged: scores {mean:.2f}, but it is the reference in another form and the "
            f"honest answers are the references; give --honest-column to judge it"
        )
    if high:
        return True, (
            f"LIKELY EXPLOIT: {probe.exploit} and scores {mean:.2f} vs {against}; fix: {fix}"
        )
    return False, f"ok: scores {mean:.2f} vs {against}"


def _fix_for(fix: str, reward_name: str) -> str:
    """A probe's fix, never advising the reward under test: when the fix names it, that
    reward already does what the fix says and still pays the probe."""
    if f"({reward_name})" not in fix:
        return fix
    return (
        f"{reward_name} is the usual fix ({fix.replace(f' ({reward_name})', '')}) and it "
        f"still pays this: tighten its parameters, or add a check that refuses this form"
    )


def _all_keys(data: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(k for r in data for k in r.columns))
