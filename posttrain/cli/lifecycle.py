"""`posttrain plan | data check | smoke | launch | eval | job | mcp-config | skills install`:
the lifecycle verbs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from posttrain.cli.common import (
    EXIT_NEEDS_APPROVAL,
    EXIT_USAGE,
    JsonFlag,
    ask_human,
    console,
    emit,
    fail,
    guarded,
    untrusted,
)
from posttrain.cli.install import CONFIG_FILES, CPU_TORCH_UV_ARGS, server_entry
from posttrain.cli.progress import EventsFlag, Reporter, progress
from posttrain.cli.run_commands import ConfirmFlag, KeyFlag, SeedsFlag, launch_command

SpecArg = Annotated[Path, typer.Argument(help="A .yaml or .json RunSpec file.")]


data_app = typer.Typer(help="Datasets: inspect what the trainer will see.", no_args_is_help=True)
skills_app = typer.Typer(
    help="Agent skills that teach the training lifecycle.", no_args_is_help=True
)
modal_app = typer.Typer(
    help="Modal: deploy the GPU functions runs are launched on.", no_args_is_help=True
)
job_app = typer.Typer(help="Jobs: evaluations and exports running detached.", no_args_is_help=True)


@modal_app.command("deploy")
def modal_deploy() -> None:
    """Deploy posttrain's Modal app (once, and again after upgrading posttrain)."""
    import subprocess
    import sys

    from posttrain.core.build import fingerprint, image_pins, python_version
    from posttrain.runs.modal_backend import ModalBackend

    guarded(ModalBackend().check_configured)
    code = subprocess.run(
        [sys.executable, "-m", "modal", "deploy", "-m", "posttrain.gpu.modal_app"], check=False
    ).returncode
    if code == 0:
        print(
            f"deployed posttrain {fingerprint()} on Python {python_version()} with "
            f"{', '.join(image_pins())}: launches from this checkout now run it"
        )
    raise typer.Exit(code)


def plan_command(spec: SpecArg, as_json: JsonFlag = False) -> None:
    """Validate a spec, resolve its defaults, and estimate its cost (free)."""
    from posttrain.tools.plan import plan

    result = guarded(lambda: plan(spec))

    def render(r: dict[str, Any]) -> None:
        c = r["cost"]
        console.print(
            f"spec {r['spec_id']}: {r['spec']['model']['name']} "
            f"{r['spec']['algorithm']['kind']}, {r['spec']['algorithm']['steps']} "
            f"steps on {c['backend']}"
        )
        console.print(
            f"{c['summary']} (prices as of {c['prices_as_of']})", highlight=False, markup=False
        )
        console.print(f"basis: {(c['alternative'] or c)['basis']}", markup=False)
        if r["fit"]:
            f = r["fit"]
            measured = f", measured {f['measured_gb']} GB" if f.get("measured_gb") else ""
            console.print(
                f"memory: needs ~{f['need_gb']} GB{measured} of {f['have_gb']} GB "
                f"({'fits' if f['fits'] else 'DOES NOT FIT'})"
            )
        if r.get("defaults"):
            filled = ", ".join(f"{k}={json.dumps(v)}" for k, v in r["defaults"].items())
            console.print(f"defaults filled in: {filled}", highlight=False, markup=False)
        if r.get("experiment"):
            render_arms(r["experiment"])
        for w in r["warnings"]:
            said = w in c["summary"] or (c["timeout_note"] and c["timeout_note"] in w)
            if not said:  # the timeout's stop or risk, or a refusal, is said above
                console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)

    emit(result.model_dump(mode="json"), as_json, render)


def render_arms(e: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"experiment: {len(e['arms'])} arms x {len(e['seeds'])} seeds")
    for column in ("arm", "seeds", "expected", "worst case"):
        table.add_column(column)
    table.columns[0].no_wrap = True  # an arm's name is its overrides: never cut
    for arm in e["arms"]:
        cost = arm["cost"]
        table.add_row(
            arm["name"],
            ", ".join(map(str, arm["seeds"])),
            f"${cost['expected_usd']:.2f}, {cost['expected_s'] / 60:.1f} min",
            f"${cost['worst_case_usd']:.2f}",
        )
    console.print(table)
    console.print(
        f"ranked by {e['metric']['name']} ({e['metric']['goal']}); {e['parallel']}",
        highlight=False,
        markup=False,
    )


@data_app.command("check")
def data_check(spec: SpecArg, as_json: JsonFlag = False) -> None:
    """Rows, rendered samples, token lengths, schema problems and holdout overlap (with
    the spec's own held-out file, eval.path, as evaluate will read it)."""
    from posttrain.tools.data import check_dataset

    report = guarded(lambda: check_dataset(spec))

    def render(r: dict[str, Any]) -> None:
        console.print(
            f"{r['source']}: {r['rows_total']} rows, {r['rows_after_filters']} "
            f"after filters; {r['train_rows']} train, {r['holdout_rows']} held out"
        )
        if held := r.get("eval_file"):
            console.print(
                f"eval.path {held['path']}: {held['rows']} rows, {held['clean']} never seen "
                f"in training (what evaluate measures)",
                highlight=False,
                markup=False,
            )
        console.print(f"tokenizer: {r['tokenizer']}")
        table = Table("tokens", "p50", "p90", "p99", "max")
        for name in ("prompt_tokens", "sequence_tokens", "reference_tokens"):
            if r[name]:
                p = r[name]
                table.add_row(
                    name.split("_")[0], *(str(p[k]) for k in ("p50", "p90", "p99", "max"))
                )
        console.print(table)
        if r.get("loss"):
            console.print(f"loss: {r['loss']}")
        for i, sample in enumerate(r.get("marked_samples") or r["samples"]):
            console.rule(f"sample {i + 1}")
            console.print(sample, highlight=False, markup=False)
        for p in r["problems"]:
            console.print(f"[yellow]problem:[/yellow] {p}")
        if r["holdout_overlap"]:
            console.print(
                f"[yellow]holdout overlap:[/yellow] {r['holdout_overlap']} held-out "
                f"prompts also occur in training, e.g. {r['overlap_examples'][:2]}"
            )

    emit(report.model_dump(mode="json"), as_json, render)


def smoke(
    spec: SpecArg,
    steps: Annotated[int, typer.Option(min=1, max=50, help="Steps after the proof step.")] = 4,
    backend: Annotated[str, typer.Option(help="local (free) or modal (costs money).")] = "local",
    confirm: ConfirmFlag = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Return the run id at once; do not wait.")
    ] = False,
    as_json: JsonFlag = False,
    events: EventsFlag = False,
) -> None:
    """Dry-run the spec: a proof step and a few steps, local and free by default.

    Waits for the run to end (a line a stage and at least every 15 s, also in a pipe; JSON
    lines with --events) and exits 1 when it did not succeed, with its cause; --detach
    returns the run id at once."""
    launch_command(
        spec,
        confirm,
        None,
        as_json or events,
        smoke_steps=steps,
        smoke_backend=backend,
        wait=not detach,
        events=events,
    )


def launch(
    spec: SpecArg,
    confirm: ConfirmFlag = None,
    idempotency_key: KeyFlag = None,
    seeds: SeedsFlag = None,
    as_json: JsonFlag = False,
) -> None:
    """Start the full run (or a group, one run per seed); a human approves any spend.

    At a terminal it asks; elsewhere it returns a token for the human to approve."""
    launch_command(spec, confirm, idempotency_key, as_json, seeds=seeds)


def eval_command(
    run_id: str,
    k: Annotated[int, typer.Option(min=1, max=64, help="Samples per task.")] = 4,
    base_passes: Annotated[int, typer.Option(min=2, max=10)] = 3,
    max_tasks: Annotated[int, typer.Option(min=5, max=5000)] = 200,
    threshold: Annotated[float | None, typer.Option(help="Pass threshold on the reward.")] = None,
    seed: int = 0,
    judge: Annotated[
        str | None,
        typer.Option(
            help="A judge beside the training reward (the un-optimised metric "
            "eval_judge): a YAML/JSON file, or JSON, of a judge's params {rubric or "
            "rubric_file, base_url, model, api_key_env}.",
        ),
    ] = None,
    confirm: ConfirmFlag = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach", help="Return the job id at once; `posttrain job get ID` follows it."
        ),
    ] = False,
    as_json: JsonFlag = False,
    events: EventsFlag = False,
) -> None:
    """Base vs trained on held-out tasks: deltas, interval, p-value, verdict.

    It runs as a detached job (it survives this command: ^C stops only the waiting);
    this command waits for it, with progress (a line at least every 15 s in a pipe, JSON
    lines with --events), unless --detach."""

    from posttrain.tools.evaluate import (
        eval_question,
        outcome_of,
        plan_evaluation,
        start_evaluate,
    )

    def body() -> Any:
        from posttrain.spec.bounds import read_source

        params = read_source(judge) if judge is not None else None
        plan = plan_evaluation(run_id, k, base_passes, max_tasks, threshold, seed, judge=params)
        human = ask_human(eval_question(plan, confirm), as_json)
        return start_evaluate(plan, human=human, confirmation_token=confirm)

    as_json = as_json or events
    outcome = guarded(body)  # a question at the terminal comes before any progress bar
    if outcome.status == "started" and not detach:
        with progress(as_json, events) as reporter:
            outcome = guarded(lambda: outcome_of(follow_job(outcome.job_id, reporter)))
    emit(outcome.model_dump(mode="json"), as_json, _render_eval, events)
    if outcome.status not in ("done", "started"):
        raise typer.Exit(EXIT_NEEDS_APPROVAL)


def mcp_config(
    client: Annotated[str, typer.Argument(help="claude-code or claude-desktop.")],
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="Add posttrain to the client's config file (other servers kept)."
        ),
    ] = False,
    uvx: Annotated[
        str | None,
        typer.Option(help="Run with `uvx --from SOURCE` (a path, a git URL, or posttrain)."),
    ] = None,
    project: Annotated[
        Path, typer.Option(help="The folder the server may use (POSTTRAIN_ROOTS).")
    ] = Path("."),
) -> None:
    """The MCP config that starts this posttrain for Claude Code or Claude Desktop."""
    entry = server_entry(uvx, project.resolve())
    if client not in CONFIG_FILES:
        fail(
            f"client '{client}': use claude-code or claude-desktop",
            "e.g. posttrain mcp-config claude-code --write",
            EXIT_USAGE,
        )
    path = CONFIG_FILES[client]()
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if entry["args"][:2] == CPU_TORCH_UV_ARGS:
        print(
            "no CUDA device here: the entry takes torch's CPU build (--torch-backend cpu, "
            "~0.5 GB to download instead of ~3 GB); drop those two arguments where it "
            "runs on a machine with a GPU",
            file=sys.stderr,
        )
    if not write:
        print(json.dumps({"mcpServers": {"posttrain": entry}}, indent=2))
        return
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    config.setdefault("mcpServers", {})["posttrain"] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote posttrain into {path}; restart {client} to load it")


@job_app.command("get")
def job_get(
    job_id: str,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Wait for it to end, with progress.")
    ] = False,
    as_json: JsonFlag = False,
    events: EventsFlag = False,
) -> None:
    """A job's stage, progress and, once it ended, its result (evaluate, export)."""
    from posttrain.jobs.detached import get_job

    as_json = as_json or events
    with progress(as_json, events) as reporter:
        view = guarded(lambda: follow_job(job_id, reporter) if follow else get_job(job_id))
    emit(view.model_dump(mode="json"), as_json, _render_job, events)


@job_app.command("cancel")
def job_cancel(job_id: str, as_json: JsonFlag = False) -> None:
    """Stop a running job."""
    from posttrain.jobs.detached import cancel_job

    view = guarded(lambda: cancel_job(job_id))
    emit(view.model_dump(mode="json"), as_json, _render_job)


@skills_app.command("install")
def skills_install(
    project_dir: Annotated[Path, typer.Option(help="Project to install into.")] = Path("."),
    as_json: JsonFlag = False,
) -> None:
    """Copy the skills into PROJECT/.claude/skills and PROJECT/.agents/skills."""
    from posttrain.cli.skills import install

    written = guarded(lambda: install(project_dir))
    emit(
        {"installed": [str(p) for p in written]},
        as_json,
        lambda r: console.print("installed:\n  " + "\n  ".join(r["installed"])),
    )


def register(app: typer.Typer) -> None:
    """Add the lifecycle's command groups and commands to the app."""
    app.add_typer(data_app, name="data")
    app.add_typer(skills_app, name="skills")
    app.add_typer(modal_app, name="modal")
    app.add_typer(job_app, name="job")
    app.command("plan")(plan_command)
    app.command("smoke")(smoke)
    app.command("launch")(launch)
    app.command("eval")(eval_command)
    app.command("mcp-config")(mcp_config)


def follow_job(job_id: str | None, reporter: Reporter, every_s: float = 1.0) -> Any:
    """Wait for a job to end, reporting its stage and progress (cli/progress decides how).
    ^C stops the waiting, never the job."""
    import time

    from posttrain.jobs.detached import get_job

    assert job_id is not None
    view = get_job(job_id)
    try:
        while view.status == "running":
            label = f"{view.kind} {job_id}"
            reporter.update(job_id, label, view.done, view.total, view.message or "")
            time.sleep(every_s)
            view = get_job(job_id)
        reporter.close(job_id)
    except KeyboardInterrupt:
        console.print(
            f"stopped waiting; job {job_id} goes on: `posttrain job get {job_id} --follow` "
            f"waits again, `posttrain job cancel {job_id}` stops it"
        )
        raise typer.Exit(130) from None
    return view


def _render_job(view: dict[str, Any]) -> None:
    where = f", {view['done']}/{view['total']}" if view.get("total") else ""
    console.print(
        f"[bold]{view['job_id']}[/bold] {view['kind']} of {view['run_id']}: {view['status']}"
        f"{where} ({view['stage'] or 'starting'})",
        highlight=False,
    )
    if view["error"]:
        console.print(f"[bold red]error:[/bold red] {view['error']}", markup=False)
    if view["status"] == "succeeded" and view["kind"] == "evaluate":
        _render_eval(view["result"])
    elif view["result"]:
        console.print_json(json.dumps(view["result"]))


def _render_eval(outcome: dict[str, Any]) -> None:
    if outcome["status"] == "started":
        console.print(outcome["message"])
        console.print(f"then: posttrain job get {outcome['job_id']} --follow")
        return
    if outcome["status"] != "done":
        console.print(outcome["message"])
        if outcome["confirmation_token"]:
            console.print(
                f"then: posttrain eval {outcome['run_id']} --confirm "
                f"{outcome['confirmation_token']}"
            )
        return
    if outcome.get("experiment"):
        _render_experiment(outcome["experiment"])
        return
    r = outcome["result"]
    dropped = sum(v for k, v in r["dropped_contaminated"].items() if k != "duplicates")
    held = r.get("held_out") or {}
    source = f" in {untrusted(held['path'])}" if held.get("path") else ""  # eval.path
    console.print(
        f"[bold]{r['run_id']}[/bold]: {r['tasks_used']} held-out tasks of "
        f"{r['tasks_total']}{source} ({dropped} dropped as seen in training), k={r['k']} "
        f"samples each, {r['base_passes']} base passes",
        highlight=False,
    )
    table = Table("metric", "base", "trained", "delta", "95% CI", "p", "verdict")
    for m in r["metrics"] + r["unoptimised"]:
        name = m["name"] + (" *" if m["is_training_reward"] else "")
        name += "" if m["optimised"] else " †"
        outcome_word = m["verdict"].removeprefix("unproven: ").split(" (")[0]
        table.add_row(
            name,
            f"{m['base_mean']:.3f}",
            f"{m['trained_mean']:.3f}",
            f"{m['delta']:+.3f}",
            f"{m['ci_low']:+.3f}..{m['ci_high']:+.3f}",
            f"{m['p_value']:.4f}",
            outcome_word,
        )
    console.print(table)
    console.print("* the training reward: its gain proves only that the reward was learned")
    if r["unoptimised"]:
        console.print("† not trained for: a regression here qualifies the verdict")
    p = r["pass_rates"]
    if p:  # None when the spec names no reward
        console.print(
            f"pass rates (reward >= {p['threshold']:.2f}): base "
            + ", ".join(f"{k} {v:.2f}" for k, v in p["base"].items())
            + "; trained "
            + ", ".join(f"{k} {v:.2f}" for k, v in p["trained"].items())
        )
    head = r["metrics"][0]
    seeds = f", training seeds' sd {head['seed_sd']:.3f}" if head.get("seed_sd") else ""
    console.print(
        f"the interval: t at {head.get('df', 0):.0f} df over {head.get('tasks', 0)} paired "
        f"tasks (samples, passes{' and seeds' if seeds else ''} counted){seeds}",
        highlight=False,
    )
    if r.get("tasks_needed_for"):
        needed = r["tasks_needed"] if r["tasks_needed"] is not None else "out of reach"
        console.print(f"tasks needed: {needed} for {r['tasks_needed_for']}", highlight=False)
    for w in r["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}")
    console.print(f"[bold]verdict: {r['verdict']}[/bold]")


def _render_experiment(e: dict[str, Any]) -> None:
    """The arms ranked best first, each against the base and against the best: a few lines
    an arm, which read the same in a narrow terminal and in a pipe."""
    console.print(
        f"[bold]{e['experiment_id']}[/bold]: {len(e['arms'])} arms on {e['tasks_used']} "
        f"held-out tasks, ranked by {e['metric']} ({e['goal']}); training seeds' sd "
        f"{e.get('seed_sd', 0.0):.3f} (pooled over the arms)",
        highlight=False,
    )
    for a in e["arms"]:
        seeds = ", ".join(f"{m:.3f}" for m in a["seed_means"])
        console.print(
            f"{a['rank']}. {untrusted(a['arm'])}: {e['metric']} {a['mean']:.3f} (seeds "
            f"{seeds}); against the base: "
            f"{a['vs_base']['verdict']}",
            highlight=False,
        )
        if vs := a["vs_best"]:
            console.print(
                f"   behind the best by {vs['delta']:.3f} (95% CI {vs['ci_low']:.3f}.."
                f"{vs['ci_high']:.3f}; p {vs['p_value']:.3g}): "
                f"{'beyond' if vs['beyond_noise'] else 'within'} noise",
                highlight=False,
            )
    console.print(f"verdict: {e['verdict']}", highlight=False, markup=False)
    for w in e["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {untrusted(w)}", highlight=False)
