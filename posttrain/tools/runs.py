"""The run verbs: start, list, get, logs, traces, cancel. The CLI and the MCP server both call
these, so the two never disagree. Inputs are plain values; outputs are pydantic models."""

from __future__ import annotations

import bisect
import json
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.launching.early_stop import check_experiments, stored_decision
from posttrain.reports import trace_page
from posttrain.reports.health import (
    dry_run_summary,
    evaluation_list,
    evaluation_summary,
    preference_summary,
    run_health,
)
from posttrain.reports.run_models import (
    EXPERIMENT_ID_PREFIX,
    TREND_WINDOW,
    CancelResult,
    LogLine,
    LogPage,
    RunDetail,
    RunSummary,
    Stage,
    TracePage,
    TraceRow,
    Trend,
    id_kind,
)
from posttrain.runs.context import Context, is_stalled
from posttrain.runs.held import cancel_held
from posttrain.runs.layout import RUN_META, SPEC, read_json
from posttrain.runs.run_row import RunRow

MAX_LOG_LINES = 2000
MAX_TRACE_SAMPLES = 64
MAX_TRACE_STEPS = 20  # steps per sample_traces page; next_steps pages on
MAX_TRACE_CHARS = trace_page.PAGE_CHARS  # text per page, a shared head said once included
MAX_CURSOR = 2**63 - 1  # a log cursor is a SQLite integer
MAX_FOLLOW_S = 60.0
MAX_METRIC_POINTS = 2000  # per-step metrics in a verbose get_run


def _status(row: RunRow) -> str:
    return "stalled" if is_stalled(row) else row.status


def _summary_fields(row: RunRow, now: float, ctx: Context) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "name": row.name,
        "status": _status(row),
        "stage": row.stage,
        "model": row.model,
        "kind": row.kind,
        "backend": row.backend,
        "step": row.step,
        "total_steps": row.total_steps,
        "reward": row.reward,
        "best_reward": row.best_reward,
        "created_at": row.created_at,
        "age_s": round(now - row.created_at, 1) if row.created_at else None,
        "cost_usd": ctx.cost_usd(row),
        "group_id": row.group_id,
        "seed": row.seed,
        "arm": row.arm,
        "stopped_early": _stopped_early(row),
    }


def _stopped_early(row: RunRow) -> str | None:
    """sweep.early_stop's word on this run, when its experiment stopped it."""
    if not (row.group_id or "").startswith(EXPERIMENT_ID_PREFIX):
        return None
    decision = stored_decision(row.path)
    if not decision or row.run_id not in decision.get("runs_stopped", []):
        return None
    return f"{decision['reason']}; saved about ${decision['saved_usd']:.2f} in all"


def list_runs(
    status: str | None = None,
    since_s: float | None = None,
    limit: int = 50,
    ctx: Context | None = None,
    group_id: str | None = None,
) -> list[RunSummary]:
    """Runs, newest first; `since_s`: only runs created in the last that many seconds;
    `group_id`: only that group's runs."""
    ctx = ctx or Context()
    ctx.refresh()
    check_experiments(ctx)  # sweep.early_stop: an experiment past its checkpoint is decided
    now = time.time()
    since = now - since_s if since_s else None
    want_stalled = status == "stalled"
    rows = ctx.index.list_runs(
        "running" if want_stalled else status, since, limit=max(1, min(limit, 1000))
    )
    if group_id is not None:
        rows = [r for r in rows if r.group_id == group_id]
    runs = [RunSummary(**_summary_fields(r, now, ctx)) for r in rows]
    return [r for r in runs if r.status == "stalled"] if want_stalled else runs


def trend(rewards: list[float], window: int = TREND_WINDOW) -> Trend:
    if not rewards:
        return Trend()
    w = min(window, max(1, len(rewards) // 2)) if len(rewards) > 1 else 1
    first, last = statistics.fmean(rewards[:w]), statistics.fmean(rewards[-w:])
    return Trend(first_mean=first, last_mean=last, window=w, delta=last - first)


def get_run(run_id: str, verbose: bool = False, ctx: Context | None = None) -> RunDetail:
    """Status, progress, reward trend, cause of failure, checkpoints; metrics when verbose."""
    from posttrain.pricing.projection import over_estimate, project
    from posttrain.runs.layout import RUN_META

    ctx = ctx or Context()
    row = ctx.run(run_id)
    if row.group_id and check_experiments(ctx):  # sweep.early_stop decided now
        row = ctx.run(run_id)
    now = time.time()
    every = ctx.index.metrics(run_id, phase=None)
    metrics = [m for m in every if m["phase"] == "train"]
    heldout = [
        {k: v for k, v in m.items() if k not in ("phase", "t")}
        for m in every
        if m["phase"] == "heldout"
    ]
    rewards = [m["reward"] for m in metrics if isinstance(m.get("reward"), int | float)]
    start = row.started_at or row.created_at
    end = row.ended_at if row.is_final else now
    run_dir, backend = row.path, ctx.backend(row.backend_name)
    spec = read_json(run_dir / SPEC)
    summary = _summary_fields(row, now, ctx)
    summary["stage"] = row.stage or backend.waiting(run_dir)
    timeout = (spec.get("compute") or {}).get("timeout_s")
    meta = read_json(run_dir / RUN_META)
    projection = project(row, every, meta, timeout, summary["cost_usd"], now)
    health = run_health(ctx, row, metrics, spec, heldout)
    if (warning := over_estimate(projection)) and not (spec.get("model") or {}).get("stand_in"):
        health.append(warning)
    return RunDetail(
        **summary,
        projection=projection,
        phase=row.phase,
        warmstart_steps=row.warmstart_steps,
        spec_id=row.spec_id,
        started_at=row.started_at,
        ended_at=row.ended_at,
        elapsed_s=round(end - start, 1) if start and end else None,
        stalled=is_stalled(row, now),
        unreachable=backend.unreachable(run_dir),
        cause=row.cause,
        still_running=backend.leftover(run_dir) if row.is_final else [],
        trend=trend(rewards),
        components=(metrics[-1].get("components") or {}) if metrics else {},
        preference=preference_summary(metrics),
        checkpoints=ctx.index.checkpoints(run_id),
        health=health,
        heldout=heldout,
        evaluation=evaluation_summary(run_dir),
        evaluations=evaluation_list(run_dir),
        run_dir=row.run_dir,
        torn_lines=row.torn_lines,
        dry_run=dry_run_summary(row, spec),
        metrics=thin(metrics, MAX_METRIC_POINTS) if verbose else None,
    )


def thin(points: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most `limit` points, evenly spaced, the last always kept (a million-step run must
    not make a million-row answer)."""
    n = len(points)
    if n <= limit:
        return points
    return [points[(i * (n - 1)) // (limit - 1)] for i in range(limit)]


def tail_logs(
    run_id: str,
    tail: int = 50,
    after: int | None = None,
    search: str | None = None,
    follow_s: float = 0.0,
    ctx: Context | None = None,
) -> LogPage:
    """The last `tail` lines, or the lines after a cursor; `follow_s` waits (bounded) for new
    ones when there are none yet."""
    if after is not None and not 0 <= after <= MAX_CURSOR:
        raise ConfigError(
            f"after {_short(after)}: a cursor is a number from an earlier tail_logs answer "
            f"(0 to {MAX_CURSOR}); omit it for the last lines"
        )
    if search is not None and any(c < " " and c not in "\t\n" for c in search):
        raise ConfigError(
            "search contains a control character (e.g. NUL); search for words, e.g. 'error'"
        )
    ctx = ctx or Context()
    row = ctx.run(run_id)
    tail = max(1, min(int(tail), MAX_LOG_LINES))
    follow_s = max(0.0, min(float(follow_s), MAX_FOLLOW_S))
    deadline = time.time() + follow_s
    while True:
        if after is None:
            lines = ctx.index.logs(run_id, tail=tail, search=search)
        else:
            lines = ctx.index.logs(run_id, after=after, search=search, limit=tail)
        if lines or time.time() >= deadline or row.is_final:
            break
        time.sleep(0.5)
        row = ctx.run(run_id)
    return LogPage(
        run_id=run_id,
        lines=[LogLine(**line) for line in lines],
        cursor=lines[-1]["pos"] if lines else after,
        status=_status(row),
    )


def parse_steps(text: str | list[int] | None, available: list[int]) -> list[int]:
    """'first', 'last', 'first,last', '1,4-9' or a list -> steps that have traces."""
    if not available:
        return []
    if text is None or text == "":
        text = "first,last"
    # Linear in what is asked and what is there: ranges are cut from the sorted steps by
    # bisection, never expanded, and membership is a set lookup.
    have = set(available)
    if isinstance(text, list):
        wanted = [int(s) for s in text]
    else:
        wanted = []
        for part in str(text).split(","):
            part = part.strip().lower()
            if part == "first":
                wanted.append(available[0])
            elif part == "last":
                wanted.append(available[-1])
            elif re.fullmatch(r"[0-9]{1,18}-[0-9]{1,18}", part):
                lo, hi = map(int, part.split("-"))
                wanted += available[
                    bisect.bisect_left(available, lo) : bisect.bisect_right(available, hi)
                ]
            elif re.fullmatch(r"[0-9]{1,18}", part):  # ASCII digits: '²' is a digit to Python
                wanted.append(int(part))
            else:
                raise ConfigError(
                    f"steps '{_short(text)}': use first, last, numbers and ranges of ASCII "
                    f"digits, e.g. 'first,last' or '1,4-9'"
                )
    found = [s for s in wanted if s in have]
    if wanted and not found:
        missing = sorted(set(wanted))[:20]
        raise NotFoundError(f"no traces at step(s) {missing}; steps with traces: {available[:50]}")
    return sorted(set(found))


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _as_ranges(steps: list[int], available: list[int], limit: int = 200) -> str:
    """Steps as 'a-b,c' over runs of consecutive available steps, at most `limit` characters
    (whole parts only: a cursor for the next page, never a wrong step)."""
    position = {s: i for i, s in enumerate(available)}
    parts: list[str] = []
    start = prev = steps[0]
    for step in [*steps[1:], None]:
        if step is not None and position[step] == position[prev] + 1:
            prev = step
            continue
        part = str(start) if start == prev else f"{start}-{prev}"
        if len(",".join([*parts, part])) > limit:
            break
        parts.append(part)
        if step is not None:
            start = prev = step
    return ",".join(parts)


def sample_traces(
    run_id: str,
    steps: str | list[int] | None = "first,last",
    n: int = 4,
    order: Literal["best", "worst", "random"] = "best",
    phase: str = "train",
    seed: int = 0,
    ctx: Context | None = None,
) -> TracePage:
    """Completions side by side with their reward components, `n` per chosen step."""
    ctx = ctx or Context()
    ctx.run(run_id)
    if order not in ("best", "worst", "random"):
        raise ConfigError(f"order '{order}': use best, worst or random")
    n = max(1, min(int(n), MAX_TRACE_SAMPLES))
    available = ctx.index.trace_steps(run_id, phase)
    chosen = parse_steps(steps, available)
    page = chosen[:MAX_TRACE_STEPS]
    by_step: dict[int, list[dict[str, Any]]] = {s: [] for s in page}
    for r in ctx.index.traces(run_id, page, phase):
        by_step[r["step"]].append(r)
    rng = random.Random(seed)
    for step in page:
        at = by_step[step]
        if order == "random":
            rng.shuffle(at)
        else:
            at.sort(
                key=lambda r: r["reward"] if r["reward"] is not None else float("-inf"),
                reverse=order == "best",
            )
        by_step[step] = at[:n]
    kept, shared, left = trace_page.lean(by_step)
    out = {
        step: [TraceRow(**{**r, "group": r["grp"]}) for r in rows] for step, rows in kept.items()
    }
    rest = left + chosen[len(page) :]
    note = None
    if rest or any(len(out[s]) < len(by_step[s]) for s in out):
        note = (
            f"{len(chosen)} steps matched; this page holds {len(out)} (at most "
            f"{MAX_TRACE_STEPS} steps and {trace_page.PAGE_CHARS:,} characters of text)"
            + ("" if not rest else ": call again with steps next_steps for more")
        )
    return TracePage(
        run_id=run_id,
        phase=phase,
        available_steps=available,
        steps=out,
        next_steps=_as_ranges(rest, available) if rest else None,
        note=note,
        shared=shared,
    )


def cancel_run(run_id: str, grace_s: float = 20.0, ctx: Context | None = None) -> CancelResult:
    """Stop a run and report whether it really stopped: every process of the run is gone
    afterwards, whatever status the index held (a run marked final whose trainer went on is
    stopped too). A group or experiment id cancels each of its runs, the queued first, so
    none starts while the others stop."""
    ctx = ctx or Context()
    if id_kind(run_id) != "run":
        ctx.refresh()
        ids = ctx.index.group_runs(run_id)  # by seed; an experiment's by arm first
        meta = {r: read_json(ctx.root / r / RUN_META) for r in ids}
        ids.sort(key=lambda r: (meta[r].get("arm_index", 0), meta[r].get("seed", 0)))
        if not ids:
            raise NotFoundError(f"no group or experiment '{run_id}'; list runs with list_runs")
        for r in ids:  # its runs queued by sweep.max_parallel first: no refresh starts one now
            cancel_held(ctx.root / r)
        queued_first = sorted(ids, key=lambda r: ctx.run(r).status != "queued")
        done = {r: cancel_run(r, grace_s, ctx) for r in queued_first}
        every = [done[r] for r in ids]
        stopped = all(c.stopped for c in every)
        statuses = sorted({c.status for c in every})
        return CancelResult(
            run_id=run_id,
            stopped=stopped,
            how=f"{len(every)} runs: {', '.join(c.how for c in every)}",
            status=", ".join(statuses),
            runs=every,
        )
    row = ctx.run(run_id)
    backend = ctx.backend(row.backend_name)
    run_dir = row.path
    if cancel_held(run_dir):  # queued in its experiment (sweep.max_parallel): never starts
        ctx.index.ingest(run_dir, final=True)
        return CancelResult(
            run_id=run_id, stopped=True, how="never started (queued)", status="cancelled"
        )
    if row.is_final and not backend.leftover(run_dir):
        return CancelResult(
            run_id=run_id, stopped=True, how=f"already {row.status}", status=row.status
        )
    result = backend.cancel(run_dir, grace_s=grace_s)
    ctx.index.ingest(run_dir, final=True)
    row = ctx.run(run_id)
    return CancelResult(
        run_id=run_id, stopped=result["stopped"], how=result["how"], status=_status(row)
    )


def stage_timeline(run_id: str, ctx: Context | None = None) -> list[Stage]:
    """The stages a run went through, with the time each began (from its events)."""
    from posttrain.runs.layout import iter_events

    ctx = ctx or Context()
    row = ctx.run(run_id)
    stages = [
        Stage(stage=e["stage"], t=e["t"]) for e in iter_events(row.path) if e.get("type") == "stage"
    ]
    if row.is_final and row.ended_at:
        stages.append(Stage(stage=row.status, t=row.ended_at))
    return stages


def latest_evaluation(run_id: str, ctx: Context | None = None) -> dict[str, Any] | None:
    """The newest stored evaluation of a run, in full, or None."""
    from posttrain.evals.history import latest

    ctx = ctx or Context()
    return latest(ctx.run(run_id).path)


def pull_run(run_id: str, out: Path, ctx: Context | None = None) -> dict[str, Any]:
    """Copy or download the run's final adapter (or weights) into `out`."""
    ctx = ctx or Context()
    row = ctx.run(run_id)
    out.mkdir(parents=True, exist_ok=True)
    files = ctx.backend(row.backend_name).pull(row.path, out)
    return {"run_id": run_id, "out": str(out), "files": [str(f) for f in files]}


def dumps(model: BaseModel | list[BaseModel]) -> str:
    if isinstance(model, list):
        return json.dumps([m.model_dump(mode="json") for m in model], indent=2)
    return model.model_dump_json(indent=2)
