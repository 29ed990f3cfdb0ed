"""sweep.early_stop: at a checkpoint, the arms beyond noise behind the leader stop.

When every arm has a run past the checkpoint's step (or has none left that could get there),
each arm's training reward per prompt over the window before the checkpoint (the traces the
index holds: tasks are prompts, replicates are seeds) goes through the experiment comparison
(posttrain.evals.comparison.compare_scores). An arm it marks behind the leader beyond noise
(multiple comparisons with the best) has its unfinished runs cancelled through the normal
cancel path (a queued one never starts); the leader, and any arm within noise of it, never
stop. The decision (the arms compared, their means, who stopped, the money saved: each
stopped run's remaining steps at its priced step cost) is written once to
`early_stop.json` in every run of the experiment, where get_experiment shows it, and a log
line in each stopped run says why. Checked on every get_run and list_runs, in any process.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError, PosttrainError
from posttrain.evals.comparison import compare_scores
from posttrain.pricing.projection import steps_usd
from posttrain.runs.context import Context
from posttrain.runs.held import PLAN, cancel_held
from posttrain.runs.layout import (
    RUN_META,
    EventWriter,
    has_result,
    read_json,
    write_json_atomic,
)
from posttrain.runs.run_lock import held_alone
from posttrain.runs.run_row import RunRow

DECISION = "early_stop.json"  # in each run of the experiment, once decided
CANCEL_GRACE_S = 10.0


def check_experiments(ctx: Context) -> list[dict[str, Any]]:
    """Decide every open experiment with an early stop whose checkpoint all arms passed; the
    decisions made now."""
    made = []
    for group_id in ctx.index.open_groups():
        run_ids = ctx.index.group_runs(group_id)
        if not run_ids:
            continue
        first = ctx.root / run_ids[0]
        rule = read_json(first / RUN_META).get("early_stop")
        if not rule or (first / DECISION).exists():
            continue
        with held_alone(first / "early_stop.lock") as mine:  # one decider at a time
            decision = None
            if mine and not (first / DECISION).exists():
                decision = decide(ctx, group_id, run_ids, rule)
            if decision:
                made.append(decision)
    return made


def decide(
    ctx: Context, group_id: str, run_ids: list[str], rule: dict[str, Any]
) -> dict[str, Any] | None:
    """The decision for one experiment, carried out and recorded; None while an arm's runs
    have not reached the checkpoint yet."""
    at, window = int(rule["at_step"]), int(rule["window"])
    rows = {r: ctx.index.get(r) for r in run_ids}
    metas = {r: read_json(ctx.root / r / RUN_META) for r in run_ids}
    by_arm: dict[str, list[str]] = {}
    for run_id in run_ids:
        by_arm.setdefault(metas[run_id].get("arm") or "?", []).append(run_id)
    measured: dict[str, list[str]] = {}
    for arm, ids in by_arm.items():
        # past the checkpoint in training (a warm start's steps count apart: phase), by a step
        # while it runs, so the checkpoint's own traces are indexed before they are read
        past = [
            r
            for r in ids
            if (row := rows[r]) is not None
            and _trained_to(row) >= at + (0 if has_result(ctx.root / r) else 1)
        ]
        waiting = [r for r in ids if not has_result(ctx.root / r)]
        if not past and waiting:
            return None  # this arm may still get there: decide when it does
        if past:
            measured[arm] = past
    scores = [
        {"arm": arm, "replicate": metas[r].get("seed", 0), "task": prompt, "score": reward}
        for arm, ids in measured.items()
        for r in ids
        for prompt, reward in ctx.index.train_rewards(r, at - window + 1, at)
    ]
    decision: dict[str, Any] = {
        "experiment_id": group_id,
        "at_step": at,
        "window": [at - window + 1, at],
        "decided_at": time.time(),
        "compared": "training reward per prompt (traces), seeds as replicates",
        "arms": {},
        "stopped": [],
        "runs_stopped": [],
        "finished_before_stop": [],
        "saved_usd": 0.0,
    }
    try:
        if len(measured) < 2:
            raise ConfigError(f"{len(measured)} arm(s) reached step {at}: nothing to compare")
        comparison = compare_scores(scores, goal="maximize")
    except ConfigError as exc:
        decision["reason"] = f"no arm stopped: {exc}"
        return _record(ctx, run_ids, decision)
    leader = comparison.leader  # the best mean: never stopped, whatever else is said
    behind = [a.arm for a in comparison.arms if a.behind_leader and a.arm != leader]
    decision["arms"] = {
        a.arm: {
            "mean": None if math.isnan(a.mean) else round(a.mean, 6),
            "replicates": a.replicates,
            "behind_leader": a.behind_leader,
        }
        for a in comparison.arms
    }
    decision["why"] = comparison.best_reason
    decision["leader"], decision["best"] = leader, comparison.best
    for arm in behind:
        for run_id in by_arm[arm]:
            run_dir = ctx.root / run_id
            if has_result(run_dir):
                continue
            if _stop(ctx, run_dir, rows[run_id]):
                # the steps it did not take: counted where it stopped, after the cancel's grace
                saved = _remaining_usd(ctx.index.get(run_id), metas[run_id], run_dir)
                _say(run_dir, arm, leader, at, saved)  # after the stop: a Modal mirror is final
                ctx.index.ingest(run_dir)
                decision["runs_stopped"].append(run_id)
                decision["saved_usd"] = round(decision["saved_usd"] + saved, 4)
            elif (row := ctx.index.get(run_id)) is not None and row.is_final:
                decision["finished_before_stop"].append(run_id)  # its end not yet seen here
    decision["stopped"] = behind
    decision["reason"] = (
        f"stopped {', '.join(behind)}: beyond noise behind {leader} at step {at}"
        if behind
        else f"no arm is beyond noise behind {leader} at step {at}: every arm goes on"
    )
    if ended := decision["finished_before_stop"]:
        decision["reason"] += f"; {len(ended)} of its runs had already ended: nothing to stop"
    return _record(ctx, run_ids, decision)


def _trained_to(row: RunRow) -> int:
    return row.step if row.phase == "train" else 0


def _remaining_usd(row: RunRow | None, meta: dict[str, Any], run_dir: Path) -> float:
    """The steps a run has left at its priced step cost (a queued run: all of them, at its
    plan's container price)."""
    total = int((row.total_steps if row else None) or meta.get("steps") or 0)
    if not total and (run_dir / PLAN).is_file():
        total = int(read_json(run_dir / PLAN)["spec"]["algorithm"]["steps"])
    done = row.step if row else 0
    plan_price = 0.0
    if (run_dir / PLAN).is_file():
        plan_price = float(read_json(run_dir / PLAN)["cost"].get("container_usd_per_s") or 0.0)
    return steps_usd(meta, total - done, plan_price)


def _say(run_dir: Path, arm: str, leader: str, at: int, saved: float) -> None:
    events = EventWriter(run_dir)
    events.write(
        "log",
        level="info",
        message=f"stopped early (sweep.early_stop): arm {arm} is beyond noise behind {leader} "
        f"at step {at}; its remaining steps (about ${saved:.2f}) are not spent",
    )
    events.close()


def _stop(ctx: Context, run_dir: Path, row: RunRow | None) -> bool:
    """The normal cancel path: a queued run never starts; a live one is cancelled. True when
    this cancelled it: a run whose end had not reached this machine yet (a Modal mirror a
    few polls behind) may turn out to have finished on its own, and saved nothing."""
    try:
        if not cancel_held(run_dir) and row is not None:
            ctx.backend(row.backend_name).cancel(run_dir, grace_s=CANCEL_GRACE_S)
    except PosttrainError:
        return False  # not stopped now (Modal unreachable): the decision says so by omission
    ctx.index.ingest(run_dir, final=has_result(run_dir))
    after = ctx.index.get(run_dir.name)
    return after is not None and after.status == "cancelled"


def _record(ctx: Context, run_ids: list[str], decision: dict[str, Any]) -> dict[str, Any]:
    for run_id in run_ids:
        write_json_atomic(ctx.root / run_id / DECISION, decision)
    return decision


def stored_decision(run_dir: Path) -> dict[str, Any] | None:
    """The experiment's early-stop decision, as its runs keep it, or None."""
    path = run_dir / DECISION
    return read_json(path) if path.is_file() else None


def standing(ctx: Context, run_ids: list[str]) -> dict[str, Any] | None:
    """The experiment's early-stop decision; before one is made (`decided_at` None), why not
    yet, or why never: every run ended before a poll found all arms past the checkpoint (it
    is checked on polls, not by a process of its own). None without sweep.early_stop."""
    first = ctx.root / run_ids[0]
    if decision := stored_decision(first):
        return decision
    rule = read_json(first / RUN_META).get("early_stop")
    if not rule:
        return None
    at, window = int(rule["at_step"]), int(rule["window"])
    rows = [ctx.index.get(r) for r in run_ids]
    if all(row is not None and row.is_final for row in rows):
        reason = (
            f"not applied: every run ended before a poll found each arm past step {at} "
            f"(sweep.early_stop is checked on get_run and list_runs while the runs train)"
        )
    else:
        reason = f"not decided yet: on the first poll after every arm passes step {at}"
    return {
        "experiment_id": read_json(first / RUN_META).get("group_id"),
        "at_step": at,
        "window": [at - window + 1, at],
        "decided_at": None,
        "reason": reason,
        "stopped": [],
        "runs_stopped": [],
        "saved_usd": 0.0,
    }
