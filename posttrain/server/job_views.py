"""The MCP tools over jobs (posttrain.jobs.detached): get_job and cancel_job. An evaluation, an
export and other work longer than a client waits on one call return a job id at once; these
tools follow it."""

# No "from __future__ import annotations": MCP reads the tool signatures at runtime.

from typing import Annotated

from mcp_types import ToolAnnotations
from pydantic import Field

from posttrain.jobs.detached import JobView, cancel_job, get_job
from posttrain.server.calls import call
from posttrain.server.run_views import READ_ONLY
from posttrain.server.toolset import ToolSet

JobId = Annotated[
    str, Field(description="A job id (job-...) from evaluate or export_run.", max_length=64)
]

TOOLS = ToolSet()


@TOOLS.tool(name="get_job", annotations=READ_ONLY)
async def get_job_(job_id: JobId) -> JobView:
    """Where a job is: running (its stage and done of total), or ended: succeeded with
    `result` (what the tool that started it returns once done, e.g. evaluate's verdict),
    failed with `error`, or cancelled. Poll it every few seconds while it runs."""
    return await call(lambda: get_job(job_id))


@TOOLS.tool(
    name="cancel_job",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False),
)
async def cancel_job_(job_id: JobId) -> JobView:
    """Stop a running job (nothing it would have stored is stored); an ended job is
    returned as it is."""
    return await call(lambda: cancel_job(job_id))
