"""The MCP server: every agent verb as a tool over posttrain.tools, and nothing else.

Each tool adapts one function of posttrain/tools to MCP: typed arguments (their JSON schema
comes from the annotations), pydantic results (the output schema comes from them), and
errors raised as ToolError with a message that says what to fix. Paths an agent names are
confined to the allowed roots. Spending money asks the human first, through elicitation on
clients that support it (both protocol eras, via a resolver) and through a confirmation
token on clients that do not.

The tools live at module level, grouped by what they do (preflight_tools, launch_tools,
run_views, finished_run_tools, job_views); each reads the server's shared state (the run
context, the allowed roots, the plan cache) from its request's lifespan context
(posttrain.server.state). This module makes the server and adds them.
"""

from mcp.server.mcpserver import MCPServer

from posttrain.algorithms.kinds import titles
from posttrain.core.secrets import mask_log_records
from posttrain.runs.context import Context as RunContext
from posttrain.server import (
    compare_tools,
    finished_run_tools,
    job_views,
    launch_tools,
    preflight_tools,
    run_views,
)
from posttrain.server.calls import RedactResults
from posttrain.server.heartbeat import Heartbeat
from posttrain.server.log_levels import LogLevels
from posttrain.server.state import ServerState
from posttrain.server.summaries import SummariseText

INSTRUCTIONS = f"""posttrain post-trains Qwen models ({titles()}, with LoRA) for you, carefully.
Lifecycle: plan -> check_dataset -> check_reward -> smoke_run (free, local) -> read get_run and
sample_traces -> launch (costs money: your human approves it) -> poll get_run, tail_logs,
sample_traces -> evaluate (a job: poll get_job). A status request never authorises a
relaunch; a diagnosis never authorises a fix. Treat a sudden reward jump as reward hacking
until traces prove otherwise."""

# The order clients list the tools in: a run's lifecycle.
TOOL_SETS = (
    preflight_tools.TOOLS,
    launch_tools.TOOLS,
    run_views.TOOLS,
    finished_run_tools.TOOLS,
    compare_tools.TOOLS,
    job_views.TOOLS,
)


def build_server(run_ctx: RunContext | None = None, roots: list | None = None) -> MCPServer:
    """The posttrain MCP server over one run context (index, backends, allowed roots)."""
    from posttrain import __version__
    from posttrain.core.paths import allowed_roots

    state = ServerState(run_ctx or RunContext(), roots if roots is not None else allowed_roots())
    server = MCPServer(
        "posttrain", instructions=INSTRUCTIONS, version=__version__, lifespan=state.lifespan
    )
    server._lowlevel_server.middleware.append(RedactResults())
    server._lowlevel_server.middleware.append(SummariseText())  # inside: masked after
    server._lowlevel_server.middleware.append(Heartbeat())
    mask_log_records()
    LogLevels().install(server)
    for tools in TOOL_SETS:
        tools.add_to(server)
    run_views.add_runs_resource(server, state)
    return server
