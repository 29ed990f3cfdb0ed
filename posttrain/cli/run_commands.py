"""`posttrain run ...` and `posttrain demo`: runs for humans and shell-driven agents."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from posttrain.cli.common import (
    EXIT_NEEDS_APPROVAL,
    JsonFlag,
    ask_human,
    console,
    emit,
    emit_json,
    guarded,
    untrusted,
)
from posttrain.cli.termplot import chart
from posttrain.core.errors import ConfigError
from posttrain.core.formatting import ago, num
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.tools import runs as tools

DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])\Z")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | None) -> float | None:
    if not text:
        return None
    match = DURATION.match(text.strip())
    if not match:
        raise ConfigError(f"--since '{text}': use a number and a unit, e.g. 90s, 15m, 2h, 3d")
    return float(match.group(1)) * UNIT_S[match.group(2)]


ConfirmFlag = Annotated[
    str | None, typer.Option("--confirm", help="The confirmation token your human approved.")
]
KeyFlag = Annotated[str | None, typer.Option(help="The same key never starts two runs.")]


SeedsFlag = Annotated[
    str | None,
    typer.Option(help="A group: one run per seed, e.g. 0,1,2 (approved once for all)."),
]


def parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(
            f"--seeds '{text}': use whole numbers separated by commas, e.g. 0,1,2"
        ) from None


def launch_command(
    spec: Path | dict[str, Any],
    confirm: str | None,
    key: str | None,
    as_json: bool,
    smoke_steps: int | None = None,
    smoke_backend: str = "local",
    seeds: str | None = None,
    wait: bool = False,
    events: bool = False,
) -> None:
    """Launch (or smoke), asking the human at the terminal when one is there; with `wait`,
    follow the runs to their end (the exit code says whether they succeeded; with `events`
    the launch's object, the progress and the end are one JSON line each)."""
    from posttrain.runs.context import Context
    from posttrain.tools.launch import (
        human_question,
        launch,
        resolve_launch,
        smoke_resolve_any,
        with_dry_run,
    )

    def body() -> Any:
        ctx = Context()
        if smoke_steps is not None:
            plan, dry = smoke_resolve_any(spec, smoke_steps, smoke_backend, ctx)
        else:  # one run, a group of seeds, or an experiment's arms x seeds
            plan, dry = resolve_launch(spec, parse_seeds(seeds), ctx, key), None
        # resolved once: the question and the launch read the same plan
        human = ask_human(human_question(plan, confirm, ctx=ctx), as_json)
        return with_dry_run(launch(plan, confirmation_token=confirm, human=human, ctx=ctx), dry)

    result = guarded(body)

    def render(r: dict[str, Any]) -> None:
        if r["status"] in ("started", "existing") and r.get("arms"):
            arms = list(dict.fromkeys(r["arms"]))
            console.print(
                f"{r['status']} experiment [bold]{r['group_id']}[/bold]: {len(r['run_ids'])} "
                f"runs, {len(arms)} arms ({'; '.join(arms)}) x seeds "
                f"{', '.join(map(str, r['seeds']))}; follow it: posttrain run list; evaluate "
                f"it: posttrain eval {r['group_id']}",
                highlight=False,
            )
        elif r["status"] in ("started", "existing") and r.get("group_id"):
            console.print(
                f"{r['status']} group [bold]{r['group_id']}[/bold]: "
                f"{', '.join(r['run_ids'])} (seeds {', '.join(map(str, r['seeds']))}); "
                f"evaluate it: posttrain eval {r['group_id']}"
            )
        elif r["status"] in ("started", "existing"):
            console.print(
                f"{r['status']} [bold]{r['run_id']}[/bold] (approved by "
                f"{r['approved_by'] or 'an earlier launch'}); follow it: posttrain "
                f"run logs {r['run_id']} --follow"
            )
            if r.get("dry_run"):
                d = r["dry_run"]
                console.print(f"dry run of your spec on a {d['stand_in']}")
                for field, change in d["cuts"].items():
                    console.print(f"  cut {field}: {change}")
                console.print("it cannot prove: " + "; ".join(d["cannot_prove"]))
            if r.get("dry_run_status"):
                console.print(r["dry_run_status"])
        else:
            console.print(r["message"])
            if r["confirmation_token"]:
                console.print(f"then: posttrain launch SPEC --confirm {r['confirmation_token']}")

    waits = wait and result.status in ("started", "existing")
    started = result.model_dump(mode="json")
    if not (waits and as_json and not events):  # --json alone: one document, at the end
        emit(started, as_json, render, events)
    if result.status in ("needs_confirmation", "declined"):
        raise typer.Exit(EXIT_NEEDS_APPROVAL)
    if waits:
        wait_for_runs(result.run_ids or [result.run_id], as_json, events, started=started)


EXIT_RUN_FAILED = 1  # the run (a dry run) ended, and not well


def wait_for_runs(
    run_ids: list[str],
    as_json: bool,
    events: bool = False,
    started: dict[str, Any] | None = None,
) -> None:
    """Until every run ends: a line a stage or each tenth of the steps, and one at least
    every 15 s (cli/progress), then the end; exits EXIT_RUN_FAILED when one did not succeed.
    With --json alone the end is one document, `started` (the launch's object) and its
    `ended`; with --events the end is the last of the JSON lines."""
    import time

    from posttrain.cli.progress import progress
    from posttrain.runs.layout import FINAL_STATUSES
    from posttrain.tools.runs import get_run

    said: dict[str, tuple[Any, ...]] = {}
    with progress(as_json, events) as reporter:
        while True:
            details = [guarded(lambda r=r: get_run(r)) for r in run_ids]
            for d in details:
                if d.run_id in said and said[d.run_id][0] in FINAL_STATUSES:
                    continue  # its end is said
                total = d.total_steps or 0
                mark = (d.status, d.stage, d.step * 10 // total if total else d.step)
                label = f"{d.run_id}: {d.status} ({d.stage or '-'}), step"
                milestone = said.get(d.run_id) != mark
                said[d.run_id] = mark
                reporter.update(d.run_id, label, d.step, total or None, milestone=milestone)
                if d.status in FINAL_STATUSES:
                    reporter.close(d.run_id)
            if all(d.status in FINAL_STATUSES for d in details):
                break
            time.sleep(1.0)
    failed = [d for d in details if d.status != "succeeded"]
    ended = {"ended": [{"run_id": d.run_id, "status": d.status, "cause": d.cause} for d in details]}
    if as_json:
        emit_json(ended if events else {**(started or {}), **ended}, events)
    for d in failed:
        if not as_json:
            console.print(
                f"[bold red]{d.run_id} {d.status}[/bold red]: {untrusted(d.cause or '')}",
                highlight=False,
            )
    if failed:
        raise typer.Exit(EXIT_RUN_FAILED)


def run_start(
    spec: Annotated[Path, typer.Argument(help="A .yaml or .json RunSpec file.")],
    confirm: ConfirmFlag = None,
    idempotency_key: KeyFlag = None,
    seeds: SeedsFlag = None,
    as_json: JsonFlag = False,
) -> None:
    """Start a run (same as `posttrain launch`); returns its id at once."""
    launch_command(spec, confirm, idempotency_key, as_json, seeds=seeds)


def run_list(
    status: Annotated[
        str | None,
        typer.Option(help="queued, running, stalled, succeeded, failed or cancelled."),
    ] = None,
    since: Annotated[str | None, typer.Option(help="Created within, e.g. 2h, 30m.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first."""
    runs = guarded(lambda: tools.list_runs(status, parse_duration(since), limit))

    def render(rows: list[dict[str, Any]]) -> None:
        table = Table("run", "status", "model", "kind", "step", "reward", "best", "age")
        table.columns[0].no_wrap = True  # an id is copied into the next command: never cut
        table.columns[0].min_width = max((len(r["run_id"]) for r in rows), default=3)
        for r in rows:
            arm = f"\n{untrusted(r['arm'])}" if r.get("arm") else ""  # an experiment's
            group = f"\n{r['group_id']}{arm} seed {r['seed']}" if r.get("group_id") else ""
            table.add_row(
                r["run_id"] + group,
                r["status"],
                untrusted(r["model"] or "-"),
                r["kind"] or "-",
                f"{r['step']}/{r['total_steps'] or '?'}",
                num(r["reward"]),
                num(r["best_reward"]),
                ago(r["age_s"]),
            )
        console.print(table if rows else "no runs")

    emit([r.model_dump(mode="json") for r in runs], as_json, render)


def run_get(
    run_id: str,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Per-step metrics.")] = False,
    plot: Annotated[bool, typer.Option(help="Draw the reward curve.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Status, progress, reward trend, cause of failure and checkpoints of one run."""
    detail = guarded(lambda: tools.get_run(run_id, verbose=verbose or plot))

    def render(d: dict[str, Any]) -> None:
        if d["phase"] == "warmstart":  # its steps are the warm-start's, not training's
            where = (
                f"warm-start step {d['step']}/{d['warmstart_steps'] or '?'}, then "
                f"{d['total_steps']} training steps"
            )
        else:
            where = f"step {d['step']}/{d['total_steps']}"
        console.print(
            f"[bold]{d['run_id']}[/bold] {d['status']} (stage {d['stage']}), "
            f"{d['kind']} on {d['model']}, {where}",
            highlight=False,
        )
        t = d["trend"]
        if pref := d.get("preference"):  # DPO: no reward; the batches' own figures
            console.print(
                f"DPO, first -> last {pref['window']} steps: "
                + ", ".join(
                    f"{name} {num(pref[name]['first'])} -> {num(pref[name]['last'])}"
                    for name in ("margin", "preference_accuracy", "logp_chosen")
                ),
                highlight=False,
            )
        rewarded = (
            ""
            if pref and d["reward"] is None
            else f"reward now {num(d['reward'])}, best {num(d['best_reward'])}; "
            f"first {t['window']} steps {num(t['first_mean'])} -> last "
            f"{t['window']} {num(t['last_mean'])}; "
        )
        console.print(f"{rewarded}elapsed {ago(d['elapsed_s'])}, cost ${d['cost_usd']:.2f}")
        if d["stalled"]:
            console.print("[bold red]stalled:[/bold red] no event for a while")
        if d["cause"]:
            console.print(f"[bold red]cause:[/bold red] {untrusted(d['cause'])}")
        if d["still_running"]:
            console.print(
                f"[bold red]still running:[/bold red] its {' and '.join(d['still_running'])} "
                f"outlived its result; `posttrain run cancel {d['run_id']}` stops them"
            )
        if d["components"]:
            console.print(
                "components: "
                + ", ".join(f"{untrusted(k)} {v:.3f}" for k, v in d["components"].items())
            )
        _render_detail_extras(d)
        if d["metrics"] and plot:
            rewards = [m.get("reward") for m in d["metrics"]]
            console.print(chart(rewards, label="reward per step"))
        elif d["metrics"]:
            for m in d["metrics"]:
                console.print(untrusted(json.dumps(m)))

    emit(detail.model_dump(mode="json"), as_json, render)


def _render_detail_extras(d: dict[str, Any]) -> None:
    """What get_run's JSON says beyond the headline: projection, health warnings, what a
    dry run proved and could not, the evaluation."""
    if d["projection"]:
        console.print(f"projection: {untrusted(d['projection']['note'])}", highlight=False)
    for warning in d["health"]:
        console.print(f"[yellow]health:[/yellow] {untrusted(warning)}", highlight=False)
    dry = d["dry_run"]
    if dry:
        state = dry.get("state") or ("complete" if dry.get("complete") else "under way")
        ended = "" if state in ("complete", "under way") else ": it did not complete"
        console.print(f"dry run ({state}{ended}):")
        for item in dry.get("proved") or []:
            console.print(f"  proved: {untrusted(str(item))}", highlight=False)
        for item in dry.get("cannot_prove") or []:
            console.print(f"  cannot prove: {untrusted(str(item))}", highlight=False)
        console.print(f"  rewards: {untrusted(dry['rewards'])}", highlight=False)
    if d["evaluation"]:
        e = d["evaluation"]
        console.print(
            f"evaluation: {untrusted(e['verdict'])} ({e['tasks_used']} tasks; "
            f"{e.get('metric') or 'reward'} {num(e['reward_base'])} -> "
            f"{num(e['reward_trained'])})",
            highlight=False,
        )
    earlier = (d.get("evaluations") or [])[:-1]  # the latest is the line above
    if earlier:
        said = ", ".join(untrusted(str(e["verdict"])) for e in earlier)
        console.print(f"  evaluated {len(earlier)} time(s) before: {said}", highlight=False)


def run_logs(
    run_id: str,
    tail: Annotated[int, typer.Option(min=1, max=2000)] = 50,
    search: Annotated[str | None, typer.Option(help="Full-text search.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """The run's log lines: the last N, a search, or follow until it ends."""
    page = guarded(lambda: tools.tail_logs(run_id, tail=tail, search=search))

    def print_lines(p: Any) -> None:
        for line in p.lines:
            if as_json:  # json.dumps: controls escaped (model_dump_json keeps C1 raw)
                print(json.dumps(line.model_dump(mode="json")))
            else:
                console.print(
                    f"[dim]{time.strftime('%H:%M:%S', time.localtime(line.t))}"
                    f"[/dim] {untrusted(line.level):7} {untrusted(line.message)}",
                    highlight=False,
                )

    if not follow:
        emit(
            page.model_dump(mode="json"),
            as_json,
            lambda _: print_lines(page) if page.lines else console.print("no log lines"),
        )
        return
    from posttrain.cli.progress import Reporter, mode_for

    # In a pipe, a quiet run still gets a line every 15 s (what it waits on); with --json
    # the log lines are the stream, and a terminal shows the lines as they come.
    reporter = Reporter("lines" if mode_for(as_json) == "lines" else "quiet")
    with reporter.running():
        print_lines(page)
        cursor = page.cursor
        while page.status not in FINAL_STATUSES:
            page = guarded(
                lambda c=cursor: tools.tail_logs(
                    run_id, tail=500, after=c, follow_s=5, search=search
                )
            )
            if page.lines:
                print_lines(page)
                reporter.heard()
            else:
                reporter.update(run_id, f"{run_id}: {page.status}", info="(no new log line)")
            cursor = page.cursor
        reporter.forget(run_id)  # the end is the last log line, not a status line


def run_trace(
    run_id: str,
    step: Annotated[str, typer.Option(help="first, last, 1,4-9 ...")] = "first,last",
    n: Annotated[int, typer.Option(min=1, max=64)] = 4,
    order: Annotated[str, typer.Option(help="best, worst or random")] = "best",
    phase: Annotated[
        str, typer.Option(help="train, warmstart, scripted, eval_base or eval_trained")
    ] = "train",
    out: Annotated[Path | None, typer.Option(help="Write step_NNNN.jsonl files here.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Sampled completions of chosen steps with their reward components."""
    page = guarded(lambda: tools.sample_traces(run_id, step, n, order, phase))  # type: ignore[arg-type]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        heads = page.shared  # whole rows in the files: each shared head put back
        for s, rows in page.steps.items():
            whole = [
                r.model_copy(update={f: h + (getattr(r, f) or "") for f, h in heads.items()})
                for r in rows
            ]
            (out / f"step_{s:04d}.jsonl").write_text(
                "".join(r.model_dump_json() + "\n" for r in whole), encoding="utf-8"
            )

    def render(p: dict[str, Any]) -> None:
        for field, head in p["shared"].items():
            console.rule(f"every sample's {field} starts with")
            console.print(untrusted(head), highlight=False)
        for s, rows in p["steps"].items():
            console.rule(f"step {s} ({order} {len(rows)})")
            for r in rows:
                comps = ", ".join(f"{untrusted(k)} {v:.2f}" for k, v in r["components"].items())
                console.print(f"[bold]reward {num(r['reward'])}[/bold]  {comps}")
                console.print(f"[dim]prompt:[/dim] {untrusted(r['prompt'])}")
                if r.get("rendered"):
                    more = " (after the head above)" if "rendered" in p["shared"] else ""
                    console.print(f"[dim]rendered{more}:[/dim]")
                    console.print(untrusted(r["rendered"]), highlight=False)
                if r.get("trained"):
                    more = " (after the head above)" if "trained" in p["shared"] else ""
                    console.print(f"[dim]trained on{more}:[/dim]")
                    console.print(untrusted(r["trained"]), highlight=False)
                if r.get("episode"):
                    print_episode(r["episode"])
                else:
                    console.print("[dim]completion:[/dim]")
                    console.print(untrusted(r["completion"]), highlight=False)
                console.print()
        if p.get("note"):
            console.print(f"[dim]{untrusted(p['note'])}[/dim]")
        if out is not None:
            console.print(f"wrote {len(p['steps'])} file(s) to {out}")

    emit(page.model_dump(mode="json"), as_json, render)


def run_pull(
    run_id: str,
    out: Annotated[Path | None, typer.Option(help="Folder (default ./RUN_ID-final).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Download a run's final adapter (or weights), from this machine or the Modal Volume."""
    files = guarded(lambda: tools.pull_run(run_id, out or Path(f"{run_id}-final")))
    emit(files, as_json, lambda r: console.print(f"wrote {len(r['files'])} files to {r['out']}"))


def run_export(
    run_id: str,
    out: Annotated[Path, typer.Option(help="A new (or empty) folder for the model.")],
    merged: Annotated[
        bool,
        typer.Option(
            "--merged/--adapter",
            help="Merge the LoRA adapter into its base (default), or keep the adapter alone.",
        ),
    ] = True,
    push_to_hub: Annotated[
        str | None,
        typer.Option(help="Also upload to this private hub repository (owner/name)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write a run's model for plain transformers: safetensors, tokenizer, chat template.

    A LoRA adapter is merged into the model it trained on, unless --adapter."""
    from posttrain.cli.progress import progress
    from posttrain.tools.export import export_run

    # the CLI is the user's own hand: any folder they can write (agents go through MCP,
    # whose tool confines `out` to the allowed roots)
    doing = "merging the adapter into its base" if merged else "writing the model"
    with progress(as_json) as reporter:  # a merge loads the base model: many seconds
        reporter.update("export", f"export {run_id}", info=doing)
        result = guarded(lambda: export_run(run_id, out, merged, push_to_hub, roots=[Path("/")]))
        reporter.forget("export")  # its result says it is done

    def render(r: dict[str, Any]) -> None:
        how = (
            f"the adapter merged into {r['base']}"
            if r["merged"]
            else ("the LoRA adapter alone" if r["adapter_only"] else "the full weights")
        )
        console.print(f"wrote {len(r['files'])} files to {r['out']}: {how}")
        console.print(f"load it with {r['loads_with']}", highlight=False)
        if r["pushed_to"]:
            console.print(f"pushed to {r['pushed_to']} (private)")

    emit(result.model_dump(mode="json"), as_json, render)


def run_cancel(run_id: str, as_json: JsonFlag = False) -> None:
    """Stop a run (after its current step; killed if it does not stop in 20 s)."""
    result = guarded(lambda: tools.cancel_run(run_id))
    emit(
        result.model_dump(mode="json"),
        as_json,
        lambda r: console.print(
            f"{r['run_id']}: {'stopped' if r['stopped'] else 'NOT stopped'} "
            f"({r['how']}); status {r['status']}"
        ),
    )


def register(app: typer.Typer, run_app: typer.Typer) -> None:
    """Add the `run` group's commands."""
    run_app.command("start")(run_start)
    run_app.command("list")(run_list)
    run_app.command("get")(run_get)
    run_app.command("logs")(run_logs)
    run_app.command("trace")(run_trace)
    run_app.command("pull")(run_pull)
    run_app.command("export")(run_export)
    run_app.command("cancel")(run_cancel)


def print_episode(episode: dict[str, Any]) -> None:
    """An environment run's trace: each turn, each call and what the tool answered."""
    console.print(
        f"[dim]episode: {episode.get('turn_count')} turn(s), {episode.get('tool_calls')} tool "
        f"call(s), {episode.get('tool_errors')} failed[/dim]"
    )
    for i, turn in enumerate(episode.get("turns", []), start=1):
        if turn.get("assistant"):
            console.print(f"[dim]turn {i}, assistant:[/dim]")
            console.print(untrusted(turn["assistant"]), highlight=False)
        for call in turn.get("calls", []):
            if not call.get("name"):
                console.print(f"[dim]turn {i}:[/dim] malformed tool call (no tool ran)")
                continue
            ok = "" if call.get("ok") else " [red](failed)[/red]"
            args = json.dumps(call.get("arguments"), ensure_ascii=False)
            console.print(
                f"[dim]turn {i}, call:[/dim] {untrusted(call['name'])}({untrusted(args)}) -> "
                f"{untrusted(str(call.get('result')))}{ok}",
                highlight=False,
            )
