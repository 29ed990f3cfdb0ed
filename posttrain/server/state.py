"""What every tool reads: one ServerState (the run context, the allowed roots, the plans
resolved once per call), which the server's lifespan hands to each request.

The tools are module-level functions (the MCP SDK's examples keep them so, over a typed
lifespan context); `state_of(ctx)` is how one reaches the state of the server it runs in.
"""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime.

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from posttrain.core.paths import confine_spec_source
from posttrain.runs.context import Context as RunContext
from posttrain.server.elicitation import PlanCache
from posttrain.spec.schema import load_spec
from posttrain.tools.launch import resolve_launch, smoke_resolve_any

SpecArg = Annotated[
    dict[str, Any] | str,
    Field(
        description="A RunSpec as a JSON object, or the path of a .yaml/.json spec file. "
        'Minimal: {"model": "tiny-local", "dataset": {"builtin": '
        '"rhyme-gym"}, "reward": "rhyme_relevance"}.'
    ),
]


@dataclass
class ServerState:
    """One server's shared state: every connection to it (and every tool call) reads this."""

    run_ctx: RunContext  # the index and the backends runs start on
    roots: list  # the folders an agent's paths are confined to
    plans: PlanCache = field(default_factory=PlanCache)  # an approval and its tool: one plan

    @asynccontextmanager
    async def lifespan(self, server: MCPServer) -> AsyncIterator["ServerState"]:
        """The server's lifespan: each request's `lifespan_context` is this state."""
        yield self

    def source_digest(self, source: dict[str, Any] | str) -> str | None:
        """A spec file's bytes, hashed (None for a spec given inline): the plan of a file
        edited since is another plan."""
        path = confine_spec_source(source, self.roots)
        if isinstance(path, str) and Path(path).is_file():
            return hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return None

    def spec_of(self, source: dict[str, Any] | str) -> Any:
        return load_spec(confine_spec_source(source, self.roots), self.roots)

    def launch_plan(self, spec: SpecArg, key: str | None, seeds: list[int] | None = None) -> Any:
        """The launch's plan (a group's, with seeds; an experiment's, with `sweep:`),
        resolved once per call: the approval resolver and the tool body read the same plan
        (the human approves what starts)."""
        return self.plans.get(
            ("launch", spec, self.source_digest(spec), key, seeds),
            lambda: resolve_launch(
                confine_spec_source(spec, self.roots), seeds, self.run_ctx, key, self.roots
            ),
        )

    def eval_plan(
        self, run_id: str, k: int, base_passes: int, max_tasks: int, judge: dict[str, Any] | None
    ) -> Any:
        """The evaluation's plan, resolved once per call: the approval resolver and the tool
        body read the same plan (the human approves what runs)."""
        from posttrain.launching.resolve_eval import held_out_digests
        from posttrain.tools.evaluate import plan_evaluation

        return self.plans.get(
            ("evaluate", run_id, k, base_passes, max_tasks, judge),
            lambda: plan_evaluation(
                run_id, k, base_passes, max_tasks, ctx=self.run_ctx, judge=judge, roots=self.roots
            ),
            fresh=lambda plan: held_out_digests(plan.runs) == plan.held_out_files,
        )

    def smoke_plan_of(self, spec: SpecArg, steps: int, backend: str) -> Any:
        return self.plans.get(
            ("smoke", spec, self.source_digest(spec), steps, backend),
            lambda: smoke_resolve_any(
                confine_spec_source(spec, self.roots), steps, backend, self.run_ctx, self.roots
            ),
        )


def state_of(ctx: Context) -> ServerState:
    """The state of the server this request reached (its lifespan context)."""
    state = ctx.request_context.lifespan_context
    if not isinstance(state, ServerState):
        raise TypeError("posttrain's tools run only on a server from build_server()")
    return state
