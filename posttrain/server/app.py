"""The MCP server: every agent verb as a tool over posttrain.tools, and nothing else.

Each tool adapts one function of posttrain/tools to MCP: typed arguments (their JSON schema
comes from the annotations), pydantic results (the output schema comes from them), and
errors raised as ToolError with a message that says what to fix. Paths an agent names are
confined to the allowed roots. Spending money asks the human first, through elicitation on
clients that support it (both protocol eras, via a resolver) and through a confirmation
token on clients that do not.
"""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime, and
# the approval resolvers are local names that string annotations could not resolve.

import logging
import time
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import (
    Context,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp_types import ToolAnnotations
from pydantic import Field

from posttrain.algorithms.kinds import titles
from posttrain.core.paths import confine_spec_source
from posttrain.core.secrets import mask_log_records
from posttrain.runs.context import Context as RunContext
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.server.calls import RedactResults, call
from posttrain.server.elicitation import Approval, NoQuestion, PlanCache, ask, decision_of
from posttrain.server.heartbeat import Heartbeat
from posttrain.server.job_views import register_job_views
from posttrain.server.log_levels import LogLevels
from posttrain.server.run_views import READ_ONLY, RunId, register_run_views
from posttrain.server.summaries import SummariseText
from posttrain.spec.schema import load_spec
from posttrain.tools import runs as run_tools
from posttrain.tools.data import DatasetReport, check_dataset
from posttrain.tools.env_check import EnvironmentCheck, check_environment, is_spec_source
from posttrain.tools.evaluate import (
    EvaluateOutcome,
    eval_question,
    plan_evaluation,
    start_evaluate,
)
from posttrain.tools.export import ExportOutcome, start_export
from posttrain.tools.launch import (
    LaunchResult,
    human_question,
    launch,
    resolve_launch,
    smoke_resolve_any,
    with_dry_run,
)
from posttrain.tools.plan import PlanResult, plan
from posttrain.tools.reward_check import RewardCheck, check_reward

log = logging.getLogger("posttrain.server")


T = TypeVar("T")

INSTRUCTIONS = f"""posttrain post-trains Qwen models ({titles()}, with LoRA) for you, carefully.
Lifecycle: plan -> check_dataset -> check_reward -> smoke_run (free, local) -> read get_run and
sample_traces -> launch (costs money: your human approves it) -> poll get_run, tail_logs,
sample_traces -> evaluate (a job: poll get_job). A status request never authorises a
relaunch; a diagnosis never authorises a fix. Treat a sudden reward jump as reward hacking
until traces prove otherwise."""

SpecArg = Annotated[
    dict[str, Any] | str,
    Field(
        description="A RunSpec as a JSON object, or the path of a .yaml/.json spec file. "
        'Minimal: {"model": "tiny-local", "dataset": {"builtin": '
        '"rhyme-gym"}, "reward": "rhyme_relevance"}.'
    ),
]


def build_server(run_ctx: RunContext | None = None, roots: list | None = None) -> MCPServer:
    """The posttrain MCP server over one run context (index, backends, allowed roots)."""
    from posttrain import __version__
    from posttrain.core.paths import allowed_roots

    rc = run_ctx or RunContext()
    roots = roots if roots is not None else allowed_roots()
    server = MCPServer("posttrain", instructions=INSTRUCTIONS, version=__version__)
    server._lowlevel_server.middleware.append(RedactResults())
    server._lowlevel_server.middleware.append(SummariseText())  # inside: masked after
    server._lowlevel_server.middleware.append(Heartbeat())
    mask_log_records()
    levels = LogLevels()
    levels.install(server)

    def spec_of(source: dict[str, Any] | str) -> Any:
        return load_spec(confine_spec_source(source, roots), roots)

    plans = PlanCache()

    def launch_plan(spec: SpecArg, key: str | None, seeds: list[int] | None = None) -> Any:
        """The launch's plan (a group's, with seeds; an experiment's, with `sweep:`),
        resolved once per call: the approval resolver and the tool body read the same plan
        (the human approves what starts)."""
        return plans.get(
            ("launch", spec, key, seeds),
            lambda: resolve_launch(confine_spec_source(spec, roots), seeds, rc, key, roots),
        )

    def smoke_plan_of(spec: SpecArg, steps: int, backend: str) -> Any:
        return plans.get(
            ("smoke", spec, steps, backend),
            lambda: smoke_resolve_any(confine_spec_source(spec, roots), steps, backend, rc, roots),
        )

    # -- approval ------------------------------------------------------------------------
    def ask_to_launch(
        spec: SpecArg,
        ctx: Context,
        confirmation_token: str | None = None,
        idempotency_key: str | None = None,
        seeds: list[int] | None = None,
    ) -> Any:
        return ask(
            ctx,
            lambda: human_question(
                launch_plan(spec, idempotency_key, seeds), confirmation_token, ctx=rc
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
        return ask(
            ctx,
            lambda: human_question(
                smoke_plan_of(spec, steps, backend)[0], confirmation_token, ctx=rc
            ),
        )

    # -- tools ---------------------------------------------------------------------------
    @server.tool(name="plan", annotations=READ_ONLY)
    async def plan_run(spec: SpecArg) -> PlanResult:
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
        return await call(lambda: plan(confine_spec_source(spec, roots), rc.index, roots))

    @server.tool(name="check_dataset", annotations=READ_ONLY)
    async def check_dataset_(spec: SpecArg) -> DatasetReport:
        """Inspect the data a spec trains on, exactly as the trainer will see it.

        Row counts (before/after filters, train/holdout), three rows rendered through the
        model's chat template, prompt and reference token-length percentiles, schema problems
        (empty prompts, duplicate ids), and held-out prompts that also occur in training.
        For a DPO spec: pairs as the trainer reads them (`pairs`: prompt once, chosen,
        rejected, token counts) and the flags of pairs that teach nothing or the wrong
        thing (identical, contradicting, cut off, length bias) in `problems`.
        Free and local; run it before check_reward.
        """
        return await call(lambda: check_dataset(spec_of(spec)))

    @server.tool(name="check_reward", annotations=READ_ONLY)
    async def check_reward_(
        reward: Annotated[
            str,
            Field(
                description="Registry name (rhyme, relevance, "
                "rhyme_relevance, tool_call) or path/to/file.py:function."
            ),
        ],
        params: Annotated[dict[str, Any] | None, Field(description="Reward parameters.")] = None,
        spec: Annotated[
            dict[str, Any] | str | None,
            Field(description="Probe on this spec's training rows (give spec or data)."),
        ] = None,
        data: Annotated[
            str | None, Field(description="Or a .jsonl/.json/.parquet/.csv file.")
        ] = None,
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
    ) -> RewardCheck:
        """Probe a reward for exploits before any GPU time: the cheapest bug to catch.

        Builds probes from your own rows (the answer among other rows' answers, every answer
        at once, the answer retracted or hedged, the prompt's last number, padding; a number
        sweep for numeric answers, every label at once for labels) beside the task's own (the
        rhyme world's for rhyme rewards, wrong calls for tool calls), scores them beside honest
        answers, flags every probe that scores as high (a tie included), reports the forms of
        the answer it accepts, and warns when the reward is all-zero, all-one or constant (the
        sign of a reward reading the wrong field). A reward file runs in a separate process
        with a time limit. Free and local.
        """

        def body() -> RewardCheck:
            from posttrain.core.paths import confine
            from posttrain.rewards.registry import confine_reward

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
                spec=spec_of(spec) if spec is not None else None,
                data=data,
                prompt_column=prompt_column,
                reference_column=reference_column,
                honest_column=honest_column,
                rows=rows,
                probes=probes,
                labels=labels,
            )

        return await call(body)

    @server.tool(name="check_environment", annotations=READ_ONLY)
    async def check_environment_(
        environment: Annotated[
            dict[str, Any] | str,
            Field(
                description="A spec with an `environment` (JSON object or .yaml/.json file), "
                "or an environment: a built-in name (calculator), path/to/file.py:ClassName, "
                "or path/to/file.py:[fn_a, fn_b]."
            ),
        ],
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

    @server.tool(
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

        def body() -> LaunchResult:
            plan, dry = smoke_plan_of(spec, steps, backend)
            started = launch(plan, confirmation_token, human=decision_of(approval), ctx=rc)
            return with_dry_run(started, dry)

        result = await call(body)
        if result.run_id and result.status == "started":
            await _report_start(ctx, result.run_id)
        return result

    @server.tool(
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
        result = await call(
            lambda: launch(
                launch_plan(spec, idempotency_key, seeds),
                confirmation_token,
                human=decision_of(approval),
                ctx=rc,
            )
        )
        if result.run_id and result.status == "started":
            # A group reports its first look without waiting: it answers at once, its runs
            # already detached (its group id is what get_run and evaluate follow).
            await _report_start(ctx, result.run_id, 0.0 if result.group_id else 5.0)
        return result

    async def _report_start(ctx: Context, run_id: str, wait_s: float = 5.0) -> None:
        """Progress notifications for the first seconds of a local run, stage by stage (a
        remote run reports once: it takes minutes to reach its first stage)."""
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

    register_run_views(server, rc, call)

    def eval_plan(
        run_id: str, k: int, base_passes: int, max_tasks: int, judge: dict[str, Any] | None
    ) -> Any:
        """The evaluation's plan, resolved once per call: the approval resolver and the tool
        body read the same plan (the human approves what runs)."""
        return plans.get(
            ("evaluate", run_id, k, base_passes, max_tasks, judge),
            lambda: plan_evaluation(
                run_id, k, base_passes, max_tasks, ctx=rc, judge=judge, roots=roots
            ),
        )

    def ask_to_evaluate(
        run_id: RunId,
        ctx: Context,
        confirmation_token: str | None = None,
        judge: dict[str, Any] | None = None,
        k: int = 4,
        base_passes: int = 3,
        max_tasks: int = 200,
    ) -> Any:
        return ask(
            ctx,
            lambda: eval_question(
                eval_plan(run_id, k, base_passes, max_tasks, judge), confirmation_token
            ),
        )

    @server.tool(
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
        max_tasks: Annotated[
            int, Field(ge=5, le=5000, description="Held-out tasks at most.")
        ] = 200,
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

        One code path for both arms (only the adapter differs); three base passes measure the
        noise floor; per-task paired deltas get a bootstrap interval and a permutation
        p-value; contaminated tasks are dropped. The verdict is improved, within_noise, worse
        or insufficient_data, prefixed "unproven:" when n < 50 tasks, fewer than 3 training
        seeds, or the metric is the training reward itself; reference_nll (the held-out
        references' likelihood, which training did not optimise) is reported apart, and a
        gain with it worse reads improved_with_regression. Local runs evaluate here for free
        (seconds on the tiny model); a Modal run's evaluation costs money and asks your
        human first. It runs as a job and answers at once with `job_id` (status started):
        poll get_job for its stage, progress and, once done, this same outcome with the
        result. The same request again is the same job.
        """
        return await call(
            lambda: start_evaluate(
                eval_plan(run_id, k, base_passes, max_tasks, judge),
                human=decision_of(approval),
                confirmation_token=confirmation_token,
                ctx=rc,
            )
        )

    @server.tool(
        name="export_run",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True),
    )
    async def export_run_(
        run_id: RunId,
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
        return await call(
            lambda: start_export(run_id, out, merged, push_to_hub, ctx=rc, roots=roots)
        )

    register_job_views(server, call)

    return server
