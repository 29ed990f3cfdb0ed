"""The MCP tools that read and stop runs: list_runs, get_run, tail_logs, sample_traces,
cancel_run, and the runs resources. Each is one function of posttrain.tools.runs."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime.

import base64
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from posttrain.core.errors import PosttrainError
from posttrain.reports.run_models import CancelResult, LogPage, RunDetail, RunSummary, TracePage
from posttrain.server.calls import call
from posttrain.server.state import ServerState, state_of
from posttrain.server.toolset import ToolSet
from posttrain.tools import runs as run_tools

RunId = Annotated[
    str, Field(description="A run id from launch, smoke_run or list_runs.", max_length=64)
]
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)


class RunList(BaseModel):
    runs: list[RunSummary]


TOOLS = ToolSet()


@TOOLS.tool(annotations=READ_ONLY)
async def list_runs(
    status: Annotated[
        Literal["queued", "running", "stalled", "succeeded", "failed", "cancelled"] | None,
        Field(description="Only this status."),
    ] = None,
    since_s: Annotated[
        float | None,
        Field(
            ge=0,
            le=365 * 86400,
            description=("Only runs created in the last this many seconds."),
        ),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 50,
    *,
    ctx: Context,
) -> RunList:
    """List runs, newest first, with status, step, reward now and best."""
    return RunList(
        runs=await call(lambda: run_tools.list_runs(status, since_s, limit, state_of(ctx).run_ctx))
    )


@TOOLS.tool(annotations=READ_ONLY)
async def get_run(
    run_id: RunId,
    ctx: Context,
    verbose: Annotated[bool, Field(description="Include per-step metrics.")] = False,
    plot: Annotated[
        bool,
        Field(
            description="Also return the reward curve as a PNG image "
            "(for clients that show images)."
        ),
    ] = False,
) -> RunDetail:
    """Status of one run: stage, step/total, reward now/best/trend, elapsed time, cost so
    far, stalled flag, cause of failure, checkpoints, the evaluation verdict, and health
    warnings (reward jumps, length collapse, repeated end words, zero-variance groups).
    Poll this; it is cheap."""
    rc = state_of(ctx).run_ctx
    detail = await call(lambda: run_tools.get_run(run_id, verbose or plot, rc))
    if not plot:
        return detail
    from posttrain.dashboard.charts import metric_series, png_chart

    image = png_chart(
        metric_series(detail.metrics or [], "reward"), f"{detail.run_id}: reward per step"
    )
    if not verbose:
        detail.metrics = None
    return CallToolResult(  # type: ignore[return-value]
        content=[
            TextContent(type="text", text=detail.model_dump_json()),
            ImageContent(
                type="image", data=base64.b64encode(image).decode(), mime_type="image/png"
            ),
        ],
        structured_content=detail.model_dump(mode="json"),
    )


@TOOLS.tool(annotations=READ_ONLY)
async def tail_logs(
    run_id: RunId,
    ctx: Context,
    tail: Annotated[int, Field(ge=1, le=2000, description="Last N lines.")] = 50,
    after: Annotated[
        int | None, Field(ge=0, description="Cursor from a previous call: only newer lines.")
    ] = None,
    search: Annotated[str | None, Field(max_length=200, description="Full-text search.")] = None,
    follow_s: Annotated[
        float,
        Field(ge=0, le=60, description="Wait up to this long for new lines when there are none."),
    ] = 0.0,
) -> LogPage:
    """A run's log lines: the last N, a search, or new lines after a cursor (bounded
    follow). Read it when get_run shows a failure or a stall."""
    rc = state_of(ctx).run_ctx
    return await call(lambda: run_tools.tail_logs(run_id, tail, after, search, follow_s, rc))


@TOOLS.tool(annotations=READ_ONLY)
async def sample_traces(
    run_id: RunId,
    ctx: Context,
    steps: Annotated[
        str,
        Field(
            max_length=200,
            description=("first, last, step numbers and ranges: 'first,last' or '1,40-60'."),
        ),
    ] = "first,last",
    n: Annotated[int, Field(ge=1, le=64, description="Samples per step.")] = 4,
    order: Annotated[
        Literal["best", "worst", "random"],
        Field(description="best: what the reward loves (hunt hacks); worst: what it punishes."),
    ] = "best",
) -> TracePage:
    """Real completions side by side with their reward components, an early step beside
    a late one. Read them at every stage: a rising reward proves nothing until the
    outputs are good."""
    rc = state_of(ctx).run_ctx
    return await call(lambda: run_tools.sample_traces(run_id, steps, n, order, ctx=rc))


@TOOLS.tool(
    annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=True, openWorldHint=True, idempotentHint=True
    )
)
async def cancel_run(run_id: RunId, ctx: Context) -> CancelResult:
    """Stop a run after its current step (killed if it does not stop within 20 s) and
    report whether it really stopped. A group or experiment id (grp-..., exp-...) stops
    every run of it, the queued first. Only when your human asked for it."""
    rc = state_of(ctx).run_ctx
    return await call(lambda: run_tools.cancel_run(run_id, ctx=rc))


# -- resources ---------------------------------------------------------------------------
@TOOLS.resource("posttrain://runs/{run_id}", mime_type="application/json")
def run_resource(run_id: str, ctx: Context) -> str:
    """One run with its per-step metrics."""
    rc = state_of(ctx).run_ctx
    try:
        return run_tools.get_run(run_id, verbose=True, ctx=rc).model_dump_json(indent=2)
    except PosttrainError as exc:
        raise ValueError(str(exc)) from None


def add_runs_resource(server: MCPServer, state: ServerState) -> None:
    """posttrain://runs. The SDK hands a static resource no request context, so this one
    is bound to the server's state as the server is built."""

    def runs_resource() -> str:
        """Every run, newest first."""
        return run_tools.dumps(run_tools.list_runs(limit=1000, ctx=state.run_ctx))

    server.resource("posttrain://runs", mime_type="application/json")(runs_resource)
