"""`posttrain demo`: the whole lifecycle on the tiny model, followed with progress bars, and
what it learned (the rhyme curve, the best samples of the first and last step)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from posttrain.cli_common import JsonFlag, console, guarded, untrusted
from posttrain.demo import DEMO_STEPS, DEMO_WARMSTART_STEPS
from posttrain.formatting import num
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.termplot import chart, sparkline


def register_demo(app: typer.Typer) -> None:
    from posttrain.tools import runs as tools
    from posttrain.tools.launch import launch

    @app.command("demo")
    def demo(
        steps: Annotated[int, typer.Option(min=1, help="GRPO steps.")] = DEMO_STEPS,
        warmstart_steps: Annotated[
            int, typer.Option(min=1, help="SFT warm-start steps.")
        ] = DEMO_WARMSTART_STEPS,
        seed: int = 0,
        as_json: JsonFlag = False,
    ) -> None:
        """Train the tiny model to rhyme on this machine: SFT warm-start, then GRPO (~3 min)."""
        from posttrain.demo import demo_spec

        started = guarded(lambda: launch(demo_spec(steps, warmstart_steps, seed)))
        run_id = started.run_id
        if not as_json:
            console.print(
                f"demo run [bold]{run_id}[/bold]: tiny Qwen3-shaped model, SFT "
                f"warm-start then GRPO with rhyme_relevance (Ctrl-C cancels it)"
            )
        try:
            detail = _follow(tools, run_id, quiet=as_json)
        except KeyboardInterrupt:
            console.print("cancelling the demo run...")
            tools.cancel_run(run_id)
            raise typer.Exit(130) from None
        if as_json:
            print(detail.model_dump_json(indent=2))
        else:
            _demo_summary(tools, detail)
        if detail.status != "succeeded":
            raise typer.Exit(5)


def _follow(tools: Any, run_id: str, quiet: bool) -> Any:
    """Poll the run, with progress bars for the warm-start and GRPO, until it ends."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    ) as progress:
        tasks: dict[str, Any] = {}
        while True:
            d = tools.get_run(run_id)
            phase = d.phase or "preparing"
            total = d.warmstart_steps if phase == "warmstart" else d.total_steps
            if phase not in tasks and d.phase:
                for other in tasks.values():
                    done = progress.tasks[other].total
                    progress.update(other, completed=done, info=f"step {done}/{done}")
                label = "SFT warm-start" if phase == "warmstart" else "GRPO"
                tasks[phase] = progress.add_task(label, total=total, info="")
            if phase in tasks:
                info = f"step {d.step}/{total}"
                if phase == "train" and d.reward is not None:
                    info += f"  reward {d.reward:.3f}  rhyme {d.components.get('rhyme', 0):.2f}"
                progress.update(tasks[phase], completed=d.step, info=info)
            if d.status in FINAL_STATUSES:
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
        f"\nnext: posttrain eval {d.run_id} (base vs trained on held-out prompts)"
        f"\ninspect: posttrain run get {d.run_id} --plot | posttrain run trace "
        f"{d.run_id} --step last | posttrain run logs {d.run_id}"
    )
