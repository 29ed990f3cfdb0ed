"""What a finished run gives, as MCP tools: evaluate (the proof that training helped, asking
the human first where it costs money) and export_run (the trained model in a folder). Both
start a job and answer at once with its id; get_job follows it."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime, and the
# approval resolver is a name that string annotations could not resolve.

from typing import Annotated, Any

from mcp.server.mcpserver import Context, ElicitationResult, Resolve
from mcp_types import ToolAnnotations
from pydantic import Field

from posttrain.server.calls import call
from posttrain.server.elicitation import Approval, ask, decision_of
from posttrain.server.run_views import RunId
from posttrain.server.state import state_of
from posttrain.server.toolset import ToolSet
from posttrain.tools.evaluate import EvaluateOutcome, eval_question, start_evaluate
from posttrain.tools.export import ExportOutcome, start_export

TOOLS = ToolSet()


def ask_to_evaluate(
    run_id: RunId,
    ctx: Context,
    confirmation_token: str | None = None,
    judge: dict[str, Any] | None = None,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
) -> Any:
    state = state_of(ctx)
    return ask(
        ctx,
        lambda: eval_question(
            state.eval_plan(run_id, k, base_passes, max_tasks, judge), confirmation_token
        ),
    )


@TOOLS.tool(
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True)
)
async def evaluate(
    run_id: Annotated[
        str,
        Field(
            max_length=64,
            description="A run id, or a group id (grp-...) from a launch with seeds: "
            "every seed is evaluated on the same tasks and the spread between seeds "
            "(training noise) is measured.",
        ),
    ],
    approval: Annotated[ElicitationResult[Approval], Resolve(ask_to_evaluate)],
    ctx: Context,
    k: Annotated[int, Field(ge=1, le=64, description="Samples per task.")] = 4,
    base_passes: Annotated[
        int,
        Field(
            ge=2,
            le=10,
            description=(
                "Base passes with different seeds: they measure the evaluation's own noise."
            ),
        ),
    ] = 3,
    max_tasks: Annotated[int, Field(ge=5, le=5000, description="Held-out tasks at most.")] = 200,
    confirmation_token: Annotated[
        str | None, Field(description="For a Modal run: the token your human approved.")
    ] = None,
    judge: Annotated[
        dict[str, Any] | None,
        Field(
            description="A judge that scores both arms besides the training reward, "
            "reported as the un-optimised metric eval_judge: the params of a judge reward "
            "({rubric or rubric_file, base_url, model, api_key_env}), with a rubric the "
            "training never saw; it scores each answer alone. A judge on this machine is "
            "free; a paid one is refused here. None: the spec's eval.judge, if any."
        ),
    ] = None,
) -> EvaluateOutcome:
    """Prove (or fail to prove) that training helped: base vs trained on held-out tasks.

    One code path for both arms (only the adapter differs); three base passes; one
    interval per metric over the paired tasks, holding the samples, the passes and a
    group's training seeds; contaminated tasks are dropped. The verdict is improved,
    within_noise, worse or insufficient_data, prefixed "unproven:" when n < 20 tasks, one
    training seed, or the metric is the training reward itself; reference_nll (the held-out
    references' likelihood, which training did not optimise) is reported apart, and a
    gain with it worse reads improved_with_regression. Local runs evaluate here for free
    (seconds on the tiny model); a Modal run's evaluation costs money and asks your
    human first. It runs as a job and answers at once with `job_id` (status started):
    poll get_job for its stage, progress and, once done, this same outcome with the
    result. The same request again is the same job.
    """
    state = state_of(ctx)
    return await call(
        lambda: start_evaluate(
            state.eval_plan(run_id, k, base_passes, max_tasks, judge),
            human=decision_of(approval),
            confirmation_token=confirmation_token,
            ctx=state.run_ctx,
        )
    )


@TOOLS.tool(
    name="export_run",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True),
)
async def export_run_(
    run_id: RunId,
    ctx: Context,
    out: Annotated[
        str,
        Field(
            max_length=4096,
            description="A new (or empty) folder inside the allowed roots for the model.",
        ),
    ],
    merged: Annotated[
        bool,
        Field(
            description="true (default): the adapter merged into its base, a model plain "
            "transformers loads; false: the LoRA adapter folder alone."
        ),
    ] = True,
    push_to_hub: Annotated[
        str | None,
        Field(
            max_length=200,
            description="owner/name: also upload to a private hub repository (needs "
            "HF_TOKEN where the server runs, and the hub reachable).",
        ),
    ] = None,
) -> ExportOutcome:
    """The trained model in hand: safetensors, tokenizer and chat template in one folder.

    A LoRA run's adapter is merged into the model it trained on (its warm-start, else its
    base); a full fine-tune's weights are copied. A Modal run's files are read from the
    Volume and merged on this machine (a hub base model must be cached or reachable).
    Free. Export a run after evaluate has proven it. It runs as a job and answers at once
    with `job_id`: poll get_job for the export's result.
    """
    state = state_of(ctx)
    return await call(
        lambda: start_export(run_id, out, merged, push_to_hub, ctx=state.run_ctx, roots=state.roots)
    )
