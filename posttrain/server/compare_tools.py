"""compare_scores as an MCP tool: posttrain's statistics on scores from any harness."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from posttrain.evals.comparison import Comparison
from posttrain.server.calls import call
from posttrain.server.run_views import READ_ONLY
from posttrain.server.state import state_of
from posttrain.server.toolset import ToolSet
from posttrain.tools.compare import compare

TOOLS = ToolSet()


@TOOLS.tool(name="compare_scores", annotations=READ_ONLY)
async def compare_scores_(
    scores: Annotated[
        str | list[dict[str, Any]],
        Field(
            description="A .jsonl (or .csv) file of rows {arm, replicate, task, score}, a row "
            "per sample (a replicate is an evaluation pass or a training seed), or the rows."
        ),
    ],
    ctx: Context,
    baseline: Annotated[
        str | None, Field(description="The arm the others are compared with (default: base).")
    ] = None,
    goal: Annotated[
        Literal["maximize", "minimize"], Field(description="Whether a higher score is better.")
    ] = "maximize",
) -> Comparison:
    """Each arm against the baseline (delta, 95% interval, verdict improved / worse /
    within_noise) and the best arm, named only beyond noise (else null): the statistics
    evaluate uses, on scores from lm-eval, inspect, whileai or your own harness. Free and
    local. Bad rows are refused naming their line."""
    roots = state_of(ctx).roots
    return await call(lambda: compare(scores, baseline, goal, roots))
