"""compare_scores: posttrain's statistics on anyone's scores.

Rows `{"arm", "replicate", "task", "score"}`, a row per sample (lm-eval, inspect, whileai or
a harness of one's own: a replicate is an evaluation pass or a training seed). Each arm gets
its delta against the baseline, paired by task, with the interval and verdict of
`posttrain.evals.paired`; `best` names an arm only when it leads every other arm, the
baseline included, beyond noise: its interval against each of them lies above zero. Among
arms that are in truth equal that names one at most alpha of the time whatever their number
(two tied leaders: exactly alpha, a two-sided test between them; more: less), where a
one-sided or a Dunnett quantile would name one of two tied arms up to 2 alpha. The same
functions give evaluate's and experiments' verdicts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.evals import paired

FIELDS = ("arm", "replicate", "task", "score")
UNTRAINED = ("base", "baseline")  # a baseline named so is the model before training
MIN_TASKS = 5  # below it no verdict is given: the interval's own estimate of spread is too rough
Goal = Literal["maximize", "minimize"]
METHOD = (
    "paired by task; the arms' per-task means differ by the delta; its variance adds the "
    "per-task differences' (tasks, samples and passes) and the replicates' (training seeds, "
    "pooled across the compared arms), Satterthwaite's degrees of freedom, a two-sided t "
    "interval at 95%; the best arm is named when its interval against every other arm lies "
    "above zero"
)


class ArmScores(BaseModel):
    arm: str
    replicates: int
    tasks: int = Field(description="Tasks paired with the baseline (in every replicate of both).")
    samples: int
    mean: float = Field(description="Mean over the tasks every arm shares.")
    delta: float | None = Field(None, description="This arm minus the baseline, over tasks.")
    ci_low: float | None = None
    ci_high: float | None = None
    se: float | None = None
    df: float | None = None
    p_value: float | None = None
    replicate_sd: float | None = Field(
        None, description="The training-seed sd counted in the interval (0: not measured)."
    )
    verdict: str = Field(
        description="improved | worse | within_noise (better meaning the goal), baseline for "
        "the baseline itself, or insufficient_data (the reason says why)."
    )
    reason: str | None = Field(None, description="Why no verdict could be given.")
    behind_leader: bool = Field(
        False, description="Behind the leading arm beyond noise: it cannot be the best."
    )
    caveats: list[str] = Field(default_factory=list)


class Comparison(BaseModel):
    baseline: str
    goal: Goal
    level: float = Field(description="The intervals' confidence level.")
    method: str = METHOD
    arms: list[ArmScores] = Field(description="In the order first seen, the baseline first.")
    leader: str = Field(description="The arm with the best mean (by the goal).")
    best: str | None = Field(None, description="The leader, named only beyond noise.")
    best_reason: str
    tasks_shared: int = Field(description="Tasks every replicate of every arm has.")


def compare_scores(
    rows: Iterable[Mapping[str, Any]],
    baseline: str | None = None,
    *,
    goal: Goal = "maximize",
    alpha: float = paired.ALPHA,
    lines: list[int] | None = None,
) -> Comparison:
    """Every arm against `baseline` (default: an arm named base or baseline, else the first
    arm seen), and the best arm if one leads beyond noise.

    The replicates' variance (training seeds) is pooled across the arms, which are trained
    alike; a baseline named base or baseline is the model before training, whose replicates
    are evaluation passes with no seed of their own, so its own are kept apart. `lines`
    (each row's line in its file: `read_scores`) names the rows in errors; else they are
    counted from 1."""
    source = "line" if lines is not None else "row"
    cells, first_line = _cells(rows, source, lines)
    arms = list(cells)
    if len(arms) < 2:
        raise ConfigError(f"compare needs at least two arms; the scores name {arms or 'none'}")
    base = baseline or next((a for a in arms if a.lower() in ("base", "baseline")), arms[0])
    if base not in cells:
        raise ConfigError(f"--baseline '{base}' is not an arm of the scores; they name {arms}")
    arms.remove(base)
    arms.insert(0, base)
    full = {a: _complete_tasks(cells[a]) for a in arms}
    sign = 1.0 if goal == "maximize" else -1.0
    for arm in arms[1:]:
        if not full[arm] & full[base]:
            raise ConfigError(
                f"arm '{arm}' (first at {source} {first_line[arm]}) shares no task with the "
                f"baseline '{base}' (in every replicate of both): name the tasks alike, or give "
                f"--baseline an arm scored on the same tasks"
            )
    shared = sorted(set.intersection(*(full[a] for a in arms)), key=str)
    untrained = base.lower() in UNTRAINED
    pool = arms[1:] if untrained else arms
    trained = paired.pooled([paired.spread(_matrix(cells[a], shared)) for a in pool])

    def arm_spread(arm: str, tasks: list[Any]) -> paired.Spread | None:
        if arm == base and untrained:
            return paired.spread(_matrix(cells[arm], tasks))
        return trained

    results = []
    for arm in arms:
        cell = cells[arm]
        out = ArmScores(
            arm=arm,
            replicates=len(cell),
            tasks=len(full[arm] & full[base]),
            samples=sum(len(v) for rep in cell.values() for v in rep.values()),
            mean=float(_matrix(cell, shared).mean()) if shared else math.nan,
            verdict="baseline",
        )
        if arm != base:
            tasks = sorted(full[arm] & full[base], key=str)
            a, b = _matrix(cell, tasks), _matrix(cells[base], tasks)
            out = _against(out, a, b, arm_spread(arm, tasks), arm_spread(base, tasks), sign, alpha)
        if len(cell) < 2 and trained is None and arm != base:
            out.caveats.append("one replicate and no other arm's: training noise not measured")
        results.append(out)
    leader, best, why = _best(arms, cells, shared, arm_spread, sign, alpha, results)
    return Comparison(
        baseline=base,
        goal=goal,
        level=1 - alpha,
        arms=results,
        leader=leader,
        best=best,
        best_reason=why,
        tasks_shared=len(shared),
    )


def verdict_of(estimate: paired.Estimate, sign: float, constant: bool) -> tuple[str, str | None]:
    """The verdict of a delta's interval, `sign` +1 when higher is better; with its reason
    when none can be given."""
    if estimate.tasks < MIN_TASKS:
        return "insufficient_data", f"{estimate.tasks} paired tasks < {MIN_TASKS}"
    if constant:
        return "insufficient_data", "every score is the same in both arms: nothing varies"
    low, high = sorted((sign * estimate.low, sign * estimate.high))
    if low > 0:
        return "improved", None
    if high < 0:
        return "worse", None
    return "within_noise", None


def _against(
    out: ArmScores,
    a: Any,
    b: Any,
    spread_a: paired.Spread | None,
    spread_b: paired.Spread | None,
    sign: float,
    alpha: float,
) -> ArmScores:
    import numpy as np

    est = paired.difference(a, b, spread_a, spread_b, alpha)
    values = np.concatenate([np.ravel(a), np.ravel(b)])
    verdict, reason = verdict_of(est, sign, bool(values.size) and values.min() == values.max())
    return out.model_copy(
        update={
            "delta": est.delta,
            "ci_low": est.low,
            "ci_high": est.high,
            "se": est.se,
            "df": est.df,
            "p_value": est.p_value,
            "replicate_sd": est.replicate_sd,
            "verdict": verdict,
            "reason": reason,
        }
    )


def _best(
    arms: list[str],
    cells: dict[str, Any],
    shared: list[Any],
    arm_spread: Any,
    sign: float,
    alpha: float,
    results: list[ArmScores],
) -> tuple[str, str | None, str]:
    """The leader, the best (the leader when it clears every other arm by the selection gap),
    and why; marks each arm behind the leader beyond noise."""
    means = {r.arm: r.mean for r in results}
    leader = max(arms, key=lambda a: sign * means[a] if not math.isnan(means[a]) else -math.inf)
    if len(shared) < MIN_TASKS:
        return leader, None, f"{len(shared)} tasks shared by every arm < {MIN_TASKS}: no best"
    lead = _matrix(cells[leader], shared)
    gaps = {}
    for arm in arms:
        if arm != leader:
            est = paired.difference(
                lead,
                _matrix(cells[arm], shared),
                arm_spread(leader, shared),
                arm_spread(arm, shared),
                alpha,
            )
            gaps[arm] = est
    behind = {arm: min(sign * e.low, sign * e.high) > 0 for arm, e in gaps.items()}
    for r in results:
        r.behind_leader = behind.get(r.arm, False)
    if all(behind.values()):
        return leader, leader, f"{leader} leads every other arm beyond noise"
    tied = [leader, *(a for a, far in behind.items() if not far)]
    return leader, None, f"tied within noise: {', '.join(tied)}"


def _cells(
    rows: Iterable[Mapping[str, Any]], source: str, lines: list[int] | None
) -> tuple[dict[str, dict[str, dict[Any, list[float]]]], dict[str, int]]:
    """arm -> replicate -> task -> the samples' scores, and the line each arm starts at."""
    cells: dict[str, dict[str, dict[Any, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        line = lines[i] if lines is not None else i + 1
        if not isinstance(row, Mapping):
            raise ConfigError(f"{source} {line}: a score is an object with {list(FIELDS)}")
        missing = [f for f in FIELDS if row.get(f) is None or row.get(f) == ""]
        if missing:
            raise ConfigError(
                f"{source} {line}: missing {missing}; every row needs {list(FIELDS)} "
                f"(replicate 0 when there is one pass)"
            )
        score = row["score"]
        if isinstance(score, bool):
            score = float(score)
        if not isinstance(score, (int, float)) or not math.isfinite(score):
            raise ConfigError(
                f"{source} {line}: score {score!r} is not a finite number; give the sample's "
                f"score (1/0 for pass/fail)"
            )
        arm = str(row["arm"])
        first.setdefault(arm, line)
        cells[arm][str(row["replicate"])][_task_key(row["task"])].append(float(score))
    return cells, first


def _task_key(task: Any) -> Any:
    return task if isinstance(task, (str, int)) else str(task)


def _complete_tasks(replicates: dict[str, dict[Any, list[float]]]) -> set[Any]:
    """The tasks every replicate of an arm scored."""
    return set.intersection(*(set(tasks) for tasks in replicates.values()))


def _matrix(replicates: dict[str, dict[Any, list[float]]], tasks: list[Any]) -> Any:
    """replicates x tasks: each cell the mean of the replicate's samples of the task."""
    import numpy as np

    return np.array(
        [[sum(rep[t]) / len(rep[t]) for t in tasks] for rep in replicates.values()], dtype=float
    )


def read_scores(path: Any) -> tuple[list[Any], list[int]]:
    """A scores file's rows and the line each is on: JSON lines (.jsonl), or a CSV with a
    header naming the fields."""
    import csv
    import json
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"scores file {path} not found")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        for line, row in enumerate(rows, start=2):
            try:
                row["score"] = float(row.get("score") or "nan")
            except ValueError:
                raise ConfigError(f"line {line}: score {row['score']!r} is not a number") from None
        return rows, list(range(2, len(rows) + 2))
    rows, lines = [], []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rows.append(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"line {line}: not JSON ({exc.msg}); one object per line") from None
        lines.append(line)
    if not rows:
        raise ConfigError(f"scores file {path} has no rows")
    return rows, lines
