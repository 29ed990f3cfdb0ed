"""The free checks before anything runs, as MCP tools: plan, check_dataset, check_reward and
check_environment. Each adapts one function of posttrain.tools; paths an agent names are
confined to the allowed roots."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from posttrain.core.paths import confine_spec_source
from posttrain.server.calls import call
from posttrain.server.run_views import READ_ONLY
from posttrain.server.state import SpecArg, state_of
from posttrain.server.toolset import ToolSet
from posttrain.tools.data import DatasetReport, check_dataset
from posttrain.tools.env_check import EnvironmentCheck, check_environment, is_spec_source
from posttrain.tools.plan import PlanResult, plan
from posttrain.tools.reward_check import RewardCheck, check_reward

TOOLS = ToolSet()


@TOOLS.tool(name="plan", annotations=READ_ONLY)
async def plan_run(spec: SpecArg, ctx: Context) -> PlanResult:
    """Validate a training spec and estimate its cost before anything runs.

    Returns the resolved spec (all defaults filled in), its stable id, the price
    (`cost.summary` tells it: the whole run's expected time and cost and its range, the
    most it can spend (its whole timeout); when the timeout would stop the run, that
    first, with the step it stops at and what finishing needs), whether the model fits
    the GPU's memory, and warnings, among them anything `launch` would refuse (a budget
    cap, a real model on the local backend), in launch's own words. Free; use it first
    and after every change to the spec. A spec with a `sweep:` block (dotted spec keys to
    lists of values, e.g. {"algorithm.learning_rate": [1e-3, 0], "seeds": [0, 1]}) is an
    experiment: `experiment` lists every arm with its price, and `cost` is the total.
    """
    state = state_of(ctx)
    return await call(
        lambda: plan(confine_spec_source(spec, state.roots), state.run_ctx.index, state.roots)
    )


@TOOLS.tool(name="check_dataset", annotations=READ_ONLY)
async def check_dataset_(spec: SpecArg, ctx: Context) -> DatasetReport:
    """Inspect the data a spec trains on, exactly as the trainer will see it.

    Row counts (before/after filters, train/holdout), three rows rendered through the
    model's chat template, prompt and reference token-length percentiles, schema problems
    (empty prompts, duplicate ids), and held-out prompts that also occur in training.
    For a DPO spec: pairs as the trainer reads them (`pairs`: prompt once, chosen,
    rejected, token counts) and the flags of pairs that teach nothing or the wrong
    thing (identical, contradicting, cut off, length bias) in `problems`.
    Free and local; run it before check_reward.
    """
    return await call(lambda: check_dataset(state_of(ctx).spec_of(spec)))


@TOOLS.tool(name="check_reward", annotations=READ_ONLY)
async def check_reward_(
    ctx: Context,
    reward: Annotated[
        str | None,
        Field(
            description="Registry name (rhyme, relevance, rhyme_relevance, tool_call, judge) "
            "or path/to/file.py:function; with a spec, default: the spec's reward (a reward "
            "naming it takes its params; `params` overrides one)."
        ),
    ] = None,
    params: Annotated[dict[str, Any] | None, Field(description="Reward parameters.")] = None,
    spec: Annotated[
        dict[str, Any] | str | None,
        Field(description="Probe on this spec's training rows (give spec or data)."),
    ] = None,
    data: Annotated[str | None, Field(description="Or a .jsonl/.json/.parquet/.csv file.")] = None,
    honest_column: Annotated[
        str | None, Field(description="Column of known-good answers to compare probes against.")
    ] = None,
    rows: Annotated[
        int | None,
        Field(ge=1, le=256, description="Rows to probe: 32, or 8 for a judge."),
    ] = None,
    prompt_column: Annotated[
        str, Field(max_length=256, description="A data file's prompt column.")
    ] = "prompt",
    reference_column: Annotated[
        str | None,
        Field(
            max_length=256,
            description="A data file's answer column (default: the "
            "reward's first column, else 'reference').",
        ),
    ] = None,
    probes: Annotated[
        str | None,
        Field(
            description='Your own probes: a JSONL file of {"name", "completion", '
            '"max_score"} ({reference} and {prompt} are each row\'s).'
        ),
    ] = None,
    labels: Annotated[
        str | None,
        Field(
            description='A judge: a JSONL file of {"prompt", "completion", "label"}, for '
            "its agreement with your labels (Spearman's rho with an interval)."
        ),
    ] = None,
    families: Annotated[
        list[Literal["generic", "answer", "rhyme", "tool", "judge"]] | None,
        Field(
            description="Probe families to run (generic always). Default: those the reward "
            "can pay, e.g. rhyme when it pays rhymed lines more than unrhymed ones."
        ),
    ] = None,
) -> RewardCheck:
    """Probe a reward for exploits before any GPU time: the cheapest bug to catch.

    Builds probes from your own rows (the answer among other rows' answers, every answer
    at once, the answer retracted or hedged, the prompt's last number, padding; a number
    sweep for numeric answers, every label at once for labels) and degenerate outputs (the
    same end word, one-word lines, a repeated line, padding to the limit) beside the
    families the reward can pay (the rhyme world's for a reward that pays rhyme, whatever
    its name; wrong calls for tool calls; a judge's own), scores them beside honest
    answers, flags every probe that scores as high (a tie included), reports the forms of
    the answer it accepts, and warns when the reward is all-zero, all-one or constant (the
    sign of a reward reading the wrong field). A reward file runs in a separate process
    with a time limit. Free and local.
    """
    state = state_of(ctx)
    roots = state.roots

    def body() -> RewardCheck:
        from posttrain.core.paths import confine
        from posttrain.rewards.registry import confine_reward

        if reward is not None:
            confine_reward(reward, roots)
        if data is not None:
            confine(data, "data file", roots)
        if probes is not None:
            confine(probes, "probes file", roots)
        if labels is not None:
            confine(labels, "labels file", roots)
        return check_reward(
            reward,
            params,
            spec=state.spec_of(spec) if spec is not None else None,
            data=data,
            prompt_column=prompt_column,
            reference_column=reference_column,
            honest_column=honest_column,
            rows=rows,
            probes=probes,
            labels=labels,
            families=families,
        )

    return await call(body)


@TOOLS.tool(name="check_environment", annotations=READ_ONLY)
async def check_environment_(
    environment: Annotated[
        dict[str, Any] | str,
        Field(
            description="A spec with an `environment` (JSON object or .yaml/.json file), "
            "or an environment: a built-in name (calculator), path/to/file.py:ClassName, "
            "or path/to/file.py:[fn_a, fn_b]."
        ),
    ],
    ctx: Context,
    data: Annotated[
        str | None, Field(description="Rows for reset(**row): a .jsonl/.json/.csv file.")
    ] = None,
    model: Annotated[
        str | None, Field(description="Whose chat template shows the tools (no spec).")
    ] = None,
    demo_column: Annotated[
        str | None, Field(description="Column with a successful episode's tool calls.")
    ] = None,
) -> EnvironmentCheck:
    """Check a tool-using environment before any GPU time: its tools as the model sees
    them (through the real chat template), and scripted episodes that hunt for bugs.

    Plays no call, a demonstration, each tool once, malformed JSON, wrong argument
    types, an unknown tool, the same call forever (to the turn bound) and a huge
    argument; reports what the environment returned and what the reward paid, and flags
    tools that raise or hang, and a reward that never varies or pays an episode without
    a successful tool call. The environment runs in a separate process with time,
    memory and result-size bounds. Free and local.
    """
    roots = state_of(ctx).roots

    def body() -> EnvironmentCheck:
        from posttrain.core.paths import confine

        if data is not None:
            confine(data, "data file", roots)
        target = environment
        if is_spec_source(environment):
            target = confine_spec_source(environment, roots)
        return check_environment(
            target, data=data, model=model, demo_column=demo_column, roots=roots
        )

    return await call(body)
