"""`posttrain compare SCORES`: posttrain's statistics on scores from any harness."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from posttrain.cli.common import JsonFlag, console, emit, guarded, untrusted


def compare(
    scores: Annotated[
        Path,
        typer.Argument(
            help="JSON lines (or a CSV with a header) of {arm, replicate, task, score}, a row "
            "per sample; a replicate is an evaluation pass or a training seed."
        ),
    ],
    baseline: Annotated[
        str | None,
        typer.Option(help="The arm the others are compared with (default: base, else the first)."),
    ] = None,
    goal: Annotated[str, typer.Option(help="maximize or minimize the score.")] = "maximize",
    as_json: JsonFlag = False,
) -> None:
    """Each arm against the baseline (delta, 95% interval, verdict) and the best arm, named
    only beyond noise: the statistics evaluate uses, on scores from lm-eval, inspect,
    whileai or your own harness."""
    from posttrain.core.errors import ConfigError
    from posttrain.evals.comparison import compare_scores, read_scores

    def body() -> Any:
        if goal not in ("maximize", "minimize"):
            raise ConfigError(f"--goal {goal!r}: give maximize or minimize")
        rows, lines = read_scores(scores)
        return compare_scores(rows, baseline, goal=goal, lines=lines)  # type: ignore[arg-type]

    result = guarded(body)
    emit(result.model_dump(mode="json"), as_json, _render)


def _render(c: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("arm", "replicates", "tasks", "mean", "delta", "95% CI", "p", "verdict")
    for a in c["arms"]:
        ci = "" if a["ci_low"] is None else f"{a['ci_low']:+.3f}..{a['ci_high']:+.3f}"
        table.add_row(
            untrusted(a["arm"]),
            str(a["replicates"]),
            str(a["tasks"]),
            f"{a['mean']:.3f}",
            "" if a["delta"] is None else f"{a['delta']:+.3f}",
            ci,
            "" if a["p_value"] is None else f"{a['p_value']:.4f}",
            a["verdict"] + (f" ({a['reason']})" if a["reason"] else ""),
        )
    console.print(table)
    console.print(f"against {untrusted(c['baseline'])}, goal {c['goal']}: {c['method']}")
    for a in c["arms"]:
        for caveat in a["caveats"]:
            console.print(f"[yellow]{untrusted(a['arm'])}:[/yellow] {caveat}", highlight=False)
    best = untrusted(c["best"]) if c["best"] else "none beyond noise"
    console.print(f"[bold]best: {best}[/bold] ({untrusted(c['best_reason'])})", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
