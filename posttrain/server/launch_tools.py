"""Starting runs, as MCP tools: smoke_run and launch, with the approval each asks of the human
first (elicitation where the client supports it, through a resolver that works on both
protocol eras; a confirmation token where it does not), and the progress of a run's first
seconds."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime, and the
# approval resolvers are names that string annotations could not resolve.

import time
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, ElicitationResult, Resolve
from mcp_types import ToolAnnotations
from pydantic import Field

from posttrain.runs.layout import FINAL_STATUSES
from posttrain.server.calls import call
from posttrain.server.elicitation import Approval, NoQuestion, ask, decision_of
from posttrain.server.state import SpecArg, state_of
from posttrain.server.toolset import ToolSet
from posttrain.tools import runs as run_tools
from posttrain.tools.launch import LaunchResult, human_question, launch, with_dry_run

TOOLS = ToolSet()


# -- approval ----------------------------------------------------------------------------
def ask_to_launch(
    spec: SpecArg,
    ctx: Context,
    confirmation_token: str | None = None,
    idempotency_key: str | None = None,
    seeds: list[int] | None = None,
) -> Any:
    state = state_of(ctx)
    return ask(
        ctx,
        lambda: human_question(
            state.launch_plan(spec, idempotency_key, seeds), confirmation_token, ctx=state.run_ctx
        ),
    )


def ask_to_smoke(
    spec: SpecArg,
    ctx: Context,
    backend: str = "local",
    steps: int = 4,
    confirmation_token: str | None = None,
) -> Any:
    if backend == "local":
        return NoQuestion(reason="not_needed")
    state = state_of(ctx)
    return ask(
        ctx,
        lambda: human_question(
            state.smoke_plan_of(spec, steps, backend)[0], confirmation_token, ctx=state.run_ctx
        ),
    )


# -- tools -------------------------------------------------------------------------------
@TOOLS.tool(
    name="smoke_run",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True),
)
async def smoke_run_(
    spec: SpecArg,
    ctx: Context,
    approval: Annotated[ElicitationResult[Approval], Resolve(ask_to_smoke)],
    steps: Annotated[int, Field(ge=1, le=50, description="Steps after the proof step.")] = 4,
    backend: Annotated[
        Literal["local", "modal"],
        Field(description="local: free, on this machine (default); modal: costs money."),
    ] = "local",
    confirmation_token: Annotated[
        str | None, Field(description="For a modal smoke run: the token your human approved.")
    ] = None,
) -> LaunchResult:
    """Prove the pipeline works: a proof step, then a few steps, of the same spec.

    Local and free by default: it dry-runs your spec (data, template, reward, algorithm)
    on a stand-in of the model you named (its family, real tokenizer and chat template,
    random weights: it proves the plumbing, never quality); tiny-local trains for real.
    backend modal runs the real model for a few steps, which costs money and asks your
    human first. Returns a run id within seconds; then poll get_run until it ends (it
    says what the dry run proved and could not) and read sample_traces before a launch.
    An experiment (a spec with `sweep:`) gets one smoke run per distinct spec its arms
    make (arms differing only in what a dry run cuts, such as the learning rate, share one).
    """

    state = state_of(ctx)

    def body() -> LaunchResult:
        plan, dry = state.smoke_plan_of(spec, steps, backend)
        started = launch(plan, confirmation_token, human=decision_of(approval), ctx=state.run_ctx)
        return with_dry_run(started, dry)

    result = await call(body)
    if result.run_id and result.status == "started":
        await report_start(ctx, result.run_id)
    return result


@TOOLS.tool(
    name="launch",
    annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=True, openWorldHint=True, idempotentHint=True
    ),
)
async def launch_(
    spec: SpecArg,
    ctx: Context,
    approval: Annotated[ElicitationResult[Approval], Resolve(ask_to_launch)],
    confirmation_token: Annotated[
        str | None,
        Field(
            description="From an earlier needs_confirmation result, after your human "
            "approved it. Valid 15 minutes, once, for the same spec."
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Field(
            max_length=128,
            description="Launching twice with one key starts one run "
            "(default: the spec id, while its run is live).",
        ),
    ] = None,
    seeds: Annotated[
        list[int] | None,
        Field(
            min_length=1,
            max_length=16,
            description="A run group: one run per seed (e.g. [0, 1, 2]), approved once "
            "for the group's total; evaluate the group id to measure training noise. For "
            "an experiment (a spec with `sweep:`), each arm once per seed (default: "
            "sweep.seeds).",
        ),
    ] = None,
) -> LaunchResult:
    """Start the full training run. Spends GPU money: your human approves it first.

    Asks the human directly when the client supports elicitation; otherwise returns
    status needs_confirmation with a token: ask your human, then call again with it.
    Budget caps refuse a launch whatever was approved. Run smoke_run and read its traces
    first. Returns within seconds; poll get_run. An experiment (a spec with `sweep:`)
    starts every arm x seed as one approved, all-or-none launch under one experiment id.
    """
    state = state_of(ctx)
    result = await call(
        lambda: launch(
            state.launch_plan(spec, idempotency_key, seeds),
            confirmation_token,
            human=decision_of(approval),
            ctx=state.run_ctx,
        )
    )
    if result.run_id and result.status == "started":
        # A group reports its first look without waiting: it answers at once, its runs
        # already detached (its group id is what get_run and evaluate follow).
        await report_start(ctx, result.run_id, 0.0 if result.group_id else 5.0)
    return result


async def report_start(ctx: Context, run_id: str, wait_s: float = 5.0) -> None:
    """Progress notifications for the first seconds of a local run, stage by stage (a
    remote run reports once: it takes minutes to reach its first stage)."""
    rc = state_of(ctx).run_ctx
    row = rc.index.get(run_id)
    if row is not None and row.backend != "local":
        wait_s = 0.0
    # The first look is always reported: a run still queued, or whose trainer is still
    # importing, has no stage yet, and a client that heard nothing knows nothing.
    deadline, last = time.time() + wait_s, None
    while True:
        detail = await call(lambda: run_tools.get_run(run_id, ctx=rc))
        if (detail.status, detail.stage) != last:
            last = (detail.status, detail.stage)
            stage = f", stage {detail.stage}" if detail.stage else ""
            await ctx.report_progress(
                detail.step, detail.total_steps, f"{run_id}: {detail.status}{stage}"
            )
        if (
            detail.status in FINAL_STATUSES
            or detail.stage in ("training", "warmstart")
            or time.time() >= deadline
        ):
            return
        await anyio.sleep(0.5)
