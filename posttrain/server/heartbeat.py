"""Progress on every tool call over a second: a heartbeat notification each second while the
call works, with the tool's name and how long it has run. Claude Code shows these and resets
its idle watchdog on them; a client that sent no progress token hears nothing (the SDK sends
progress only against a token). Tools that report their own progress (a launch's first look
at its run) are left to do so: progress must only rise."""

import contextlib
import logging
from typing import Any

import anyio

log = logging.getLogger("posttrain.server")

BEAT_S = 1.0
SELF_REPORTING = frozenset({"launch", "smoke_run"})


class Heartbeat:
    """Server middleware: tools/call requests beat while they run."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        name = (getattr(ctx, "params", None) or {}).get("name")
        if getattr(ctx, "method", None) != "tools/call" or name in SELF_REPORTING:
            return await call_next(ctx)
        async with anyio.create_task_group() as beats:
            beats.start_soon(self._beat, ctx, str(name))
            try:
                return await call_next(ctx)
            finally:
                beats.cancel_scope.cancel()

    async def _beat(self, ctx: Any, name: str) -> None:
        seconds = 0
        while True:
            await anyio.sleep(BEAT_S)
            seconds += 1
            with contextlib.suppress(Exception):  # a client gone must not fail the call
                await ctx.session.report_progress(seconds, None, f"{name}: working, {seconds} s")
