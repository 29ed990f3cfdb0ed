"""`posttrain ...`: the agent verbs for humans and shell-driven agents.

Every command prints a table for people, or JSON with --json. Errors go to stderr as JSON
({"error", "hint", "code"}) with stable exit codes: usage 2, not found 3, backend 5.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer._click.exceptions import UsageError  # typer 0.29 vendors click: its own errors
from typer.core import TyperGroup, TyperOption

from posttrain.algorithms.kinds import titles
from posttrain.cli.common import EXIT_USAGE, JsonFlag, console, emit, fail, guarded
from posttrain.cli.compare_command import register as register_compare
from posttrain.cli.demo import register_demo
from posttrain.cli.lifecycle import register as register_lifecycle
from posttrain.cli.run_commands import register
from posttrain.core.errors import ConfigError
from posttrain.core.formatting import cut


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value, so its help shows no type. typer 0.29's rich help shows
    `<bool>` for every flag (`--json <bool>`, which reads as if `--json true` were asked
    for, and is refused); its plain help already leaves flags bare."""
    if self.is_flag or self.count:
        return None
    return _option_type(self, ctx)


_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

# `posttrain --help` lists the verbs in the order of a run's lifecycle (typer lists every
# command before every group, in the order the modules register them), then setting up.
LIFECYCLE = ("plan", "data", "reward", "env", "smoke", "launch", "run", "eval", "job", "demo")
SETUP = ("mcp-config", "skills", "serve", "dashboard", "modal")


class _LifecycleOrder(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        order = [*LIFECYCLE, *SETUP]
        rank = {name: i for i, name in enumerate(order)}
        return sorted(super().list_commands(ctx), key=lambda name: rank.get(name, len(order)))

    def invoke(self, ctx: Any) -> Any:
        """Every command's usage errors pass here: those with a known fix get it added."""
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            if hint := usage_hint(exc.format_message()):
                exc.message = f"{exc.message}\n{hint}"
            raise


def usage_hint(message: str) -> str | None:
    """The fix for a usage error click reports without one."""
    if re.search(
        r"unexpected extra arguments?(\(s\))? \((true|false|yes|no|on|off|1|0)\b", message
    ):
        return "a flag takes no value: write --json, not --json true (leave it out for false)"
    if "Missing argument 'run_id'" in message:
        return "`posttrain run list` shows the run ids"
    if "Missing argument 'spec'" in message:
        return "give a .yaml or .json RunSpec file (README.md shows one)"
    return None


app = typer.Typer(
    cls=_LifecycleOrder,
    epilog="The lifecycle: plan SPEC; data check SPEC; reward check --spec SPEC; smoke "
    "SPEC (a free dry run); launch SPEC (a human approves the cost); run get|logs|trace ID; "
    "eval ID; run cancel ID.",
    help=f"Post-train language models carefully ({titles()}, with LoRA): check the data and the "
    "reward, dry-run, launch, watch, evaluate. Qwen3 and Qwen2.5 presets or hub ids, "
    "SmolLM2-135M-Instruct (ships with the package, trains on a CPU), a local model folder or "
    ".gguf file, and tiny-local for the demo.",
    no_args_is_help=True,
    add_completion=False,
)
reward_app = typer.Typer(
    help="Rewards: list them, and probe one for exploits before training.", no_args_is_help=True
)
app.add_typer(reward_app, name="reward")
run_app = typer.Typer(
    help="Runs: start, list, inspect (get, logs, trace), export and cancel them.",
    no_args_is_help=True,
)
app.add_typer(run_app, name="run")
env_app = typer.Typer(
    help="Environments (tools over several turns): check one before training.",
    no_args_is_help=True,
)
app.add_typer(env_app, name="env")


def parse_params(pairs: list[str] | None) -> dict[str, Any]:
    """key=value pairs; values parse as JSON when they can (3, true, "x", [1,2]), else strings."""
    params: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param '{pair}' is not key=value (e.g. --param gate_at=0.5)")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


@reward_app.command("list")
def reward_list(as_json: JsonFlag = False) -> None:
    """List the built-in rewards with their components, value range and needed columns."""
    from posttrain.rewards.registry import REWARDS

    data = [info.describe() for info in REWARDS.values()]

    def render(rows: list[dict[str, Any]]) -> None:
        table = Table("reward", "range", "columns", "components", "what it pays")
        for r in rows:
            table.add_row(
                r["name"],
                f"{r['value_range'][0]:g}..{r['value_range'][1]:g}",
                ", ".join(r["columns"]) or "-",
                ", ".join(r["components"]),
                r["description"],
            )
        console.print(table)
        console.print("Your own: path/to/file.py:function (TRL signature).")

    emit(data, as_json, render)


@reward_app.command("check")
def reward_check(
    reward: Annotated[
        str | None,
        typer.Argument(
            help="A registry name or path/to/file.py:function; with --spec, default: the "
            "spec's reward (a reward naming it takes its params; --param overrides one)."
        ),
    ] = None,
    data: Annotated[
        Path | None, typer.Option(help="Dataset file (.jsonl/.json/.parquet/.csv).")
    ] = None,
    spec: Annotated[Path | None, typer.Option(help="Or probe on a spec's training rows.")] = None,
    param: Annotated[list[str] | None, typer.Option(help="Reward parameter key=value.")] = None,
    prompt_column: str = "prompt",
    reference_column: Annotated[
        str | None, typer.Option(help="Default: the reward's column, else 'reference'.")
    ] = None,
    honest_column: Annotated[
        str | None, typer.Option(help="Known-good answers to compare probes with.")
    ] = None,
    rows: Annotated[
        int | None, typer.Option(min=1, max=10_000, help="Rows to probe: 32, or 8 for a judge.")
    ] = None,
    probes: Annotated[
        Path | None,
        typer.Option(help='Your own probes: JSONL of {"name", "completion", "max_score"}.'),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(help='A judge\'s agreement with JSONL of {"prompt", "completion", "label"}.'),
    ] = None,
    families: Annotated[
        str | None,
        typer.Option(
            help="Probe families to run, by comma: generic (always), answer, rhyme, tool, "
            "judge. Default: those the reward can pay (e.g. rhyme when it pays rhymed lines)."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Probe a reward for exploits on a few rows, beside honest answers, before any GPU time."""

    def body() -> dict[str, Any]:
        from posttrain.tools.reward_check import check_reward

        return check_reward(
            reward,
            parse_params(param) if param else None,  # None: the spec's params stand
            spec=str(spec) if spec else None,
            data=str(data) if data else None,
            prompt_column=prompt_column,
            reference_column=reference_column,
            honest_column=honest_column,
            rows=rows,
            probes=str(probes) if probes else None,
            labels=str(labels) if labels else None,
            families=families,
        ).model_dump(mode="json")

    emit(guarded(body), as_json, _render_probe_report)


def _render_probe_report(report: dict[str, Any]) -> None:
    h = report["honest"]
    console.print(
        f"[bold]{report['reward']}[/bold] on {report['rows']} rows; honest answers "
        f"({report['honest_source']}): mean {h['mean']:.3f}, std {h['std']:.3f}, "
        f"min {h['min']:.3f}, max {h['max']:.3f}"
    )
    table = Table("probe", "mean", "max", "flag", "best-scoring example")
    table.columns[0].no_wrap = True  # a probe's name is what an agent greps for: never cut
    table.columns[0].min_width = max((len(p["name"]) for p in report["probes"]), default=5)
    for p in report["probes"]:
        example = p["example"].replace("\n", " / ")
        accepted = p["name"] in report.get("accepted", [])
        table.add_row(
            p["name"],
            f"{p['mean']:.3f}",
            f"{p['max']:.3f}",
            "EXPLOIT" if p["flagged"] else ("accepted" if accepted else "ok"),
            cut(example, 48),
            style="bold red" if p["flagged"] else "",
        )
    console.print(table)
    for p in report["probes"]:
        if not p["verdict"].startswith(("ok", "accepted form", "not accepted")):
            console.print(f"[bold]{p['name']}[/bold]: {p['verdict']}", highlight=False)
    forms = [p for p in report["probes"] if p["verdict"].startswith(("accepted", "not accepted"))]
    if forms:  # not exploits: what the reward accepts as the answer
        said = "; ".join(f"{p['name']} {p['verdict']}" for p in forms)
        console.print(f"the reference in other forms: {said}", highlight=False)
    if judge := report.get("judge"):
        console.print(
            f"judge at {judge['endpoint']}: {judge['requests']} requests, "
            f"{judge['cache_hits']} from the cache, {judge['ungraded']} answers ungraded",
            highlight=False,
        )
    if agreed := report.get("agreement"):
        interval = agreed["interval"]
        shown = f", 95% interval {interval[0]:.2f}..{interval[1]:.2f}" if interval else ""
        console.print(
            f"agreement with your labels on {agreed['n']} answers{shown}: {agreed['verdict']}",
            highlight=False,
        )
    for w in report["warnings"]:
        console.print(f"[bold red]warning:[/bold red] {w}")
    for n in report["notes"]:
        console.print(f"[yellow]note:[/yellow] {n}")
    if not report["flagged"] and not report["warnings"]:
        console.print("[green]No probe is flagged as an exploit.[/green]")


@env_app.command("check")
def env_check(
    target: Annotated[
        str,
        typer.Argument(
            help="A spec file with an environment, or calculator, path/to/file.py:ClassName, "
            "path/to/file.py:[fn_a, fn_b]."
        ),
    ],
    data: Annotated[Path | None, typer.Option(help="Rows for reset(**row).")] = None,
    model: Annotated[
        str | None, typer.Option(help="Whose chat template shows the tools (no spec).")
    ] = None,
    demo_column: Annotated[
        str | None, typer.Option(help="Column with a successful episode's tool calls.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Play scripted episodes in an environment (isolated) and flag its bugs, before any GPU.

    Exits 1 when something is flagged, so a script can stop before training."""

    def body() -> dict[str, Any]:
        from posttrain.tools.env_check import check_environment

        return check_environment(
            target, data=str(data) if data else None, model=model, demo_column=demo_column
        ).model_dump(mode="json")

    report = guarded(body)
    emit(report, as_json, _render_env_report)
    if not report["passed"]:
        raise typer.Exit(1)


RENDERED_SHOWN = 3000  # characters of the rendered episode in the terminal (JSON: all)
RENDERED_TAIL = 400  # of them, the end: the last turn and its closing token stay in view


def _render_env_report(report: dict[str, Any]) -> None:
    from posttrain.cli.common import untrusted

    b = report["bounds"]
    console.print(
        f"[bold]{untrusted(report['environment'])}[/bold]: {len(report['tools'])} tools; "
        f"bounds: {b['max_turns']:g} turns, {b['tool_timeout_s']:g} s a call, "
        f"{b['max_result_chars']:,.0f} characters a result"
    )
    for tool in report["tools"]:
        console.print(f"  {untrusted(tool['name'])}: {untrusted(tool['description'])}")
    table = Table("scenario", "calls ok", "reward", "what happened")
    for e in report["episodes"]:
        calls = [c for t in e["turns"] for c in t["calls"]]
        happened = e["crashed"] or "; ".join(
            [*e["problems"], *(t["note"] for t in e["turns"] if t["note"])]
        )
        if not happened and not calls:
            happened = "answered without a tool call"
        elif not happened:
            happened = f"{calls[-1]['name']} -> {calls[-1]['error'] or calls[-1]['result']}"
        happened = " ".join(str(happened).split())
        table.add_row(
            e["scenario"],
            f"{e['successful_calls']}/{len(calls)}",
            "-" if e["total"] is None else f"{e['total']:g}",
            untrusted(cut(happened, 70)),
        )
    console.print(table)
    console.print(
        f"[bold]One episode as the model sees it[/bold] ({untrusted(report['tokenizer'])}):"
    )
    shown = cut(report["rendered"], RENDERED_SHOWN, tail=RENDERED_TAIL)
    console.print(untrusted(shown), highlight=False)
    for flag in report["flagged"]:
        console.print(f"[bold red]flagged:[/bold red] {untrusted(flag)}")
    for note in report["notes"]:
        console.print(f"[yellow]note:[/yellow] {untrusted(note)}")
    if report["passed"]:
        console.print("[green]No flag: the environment is ready to train in.[/green]")


register(app, run_app)
register_lifecycle(app)
register_demo(app)
register_compare(app)


@app.command("serve")
def serve(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP bind address; not loopback needs a token.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8765,
    allow_root: Annotated[
        bool, typer.Option("--allow-root", help="Serve even when / is an allowed folder.")
    ] = False,
) -> None:
    """Run the MCP server (stdio by default) for Claude Code, Claude Desktop or any client."""
    import os
    import sys

    from posttrain.core.paths import (
        allowed_roots,
        filesystem_root_allowed,
        started_in_filesystem_root,
    )
    from posttrain.server.http import TOKEN_ENV, refuse_open_bind, serve_http

    token = os.environ.get(TOKEN_ENV) or None
    if http:
        guarded(lambda: refuse_open_bind(host, token))
    roots = allowed_roots()
    if filesystem_root_allowed(roots) and not allow_root:
        fail(
            "POSTTRAIN_ROOTS names / : an agent could read any file on this machine",
            "name your project folders in POSTTRAIN_ROOTS instead, or pass --allow-root",
            EXIT_USAGE,
        )
    if started_in_filesystem_root():
        if allow_root:
            roots = [*roots, Path("/")]
        else:  # as Claude Desktop does: serve, but not the whole filesystem
            print(
                f"posttrain: started in / , which is not an allowed folder (it would allow "
                f"every path); allowed: {', '.join(map(str, roots))}. Set POSTTRAIN_ROOTS to "
                f"your project folders (or pass --allow-root).",
                file=sys.stderr,
            )
    # The server (and mcp) loads only after every check above has passed: a refusal is
    # immediate, whatever the server costs to build.
    from posttrain.server.app import build_server

    server = build_server(roots=roots)
    if not http:
        server.run("stdio")
        return
    guarded(lambda: serve_http(server, host, port, token))


@app.command("dashboard")
def dashboard(
    host: Annotated[str, typer.Option(help="Bind address; not loopback needs a token.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8766,
) -> None:
    """Serve the dashboard: runs, curves, traces, logs and verdicts, for a human supervisor."""
    import os

    from posttrain.dashboard.app import TOKEN_ENV, serve

    console.print(f"posttrain dashboard on http://{host}:{port}/")
    guarded(lambda: serve(host, port, os.environ.get(TOKEN_ENV) or None))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
