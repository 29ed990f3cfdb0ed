"""What a long tool call tells the client while it works: MCP progress notifications (to
clients that sent a progress token) and log messages at `info`, to clients whose
`logging/setLevel` asked for that level (legacy protocol era; at 2026-07-28 a request opts
in through its `_meta`, and the SDK filters).

Tool bodies run in worker threads (posttrain.server.app `call`); `Progress.report` is called
from there and hops back onto the event loop.
"""

import logging
import warnings
from typing import Any

import anyio.from_thread
import mcp_types as types
from mcp.server.mcpserver import Context

log = logging.getLogger("posttrain.server")

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LEVEL = "info"


class LogLevels:
    """The level each client session asked for with logging/setLevel."""

    def __init__(self) -> None:
        self._by_session: dict[int, str] = {}

    def install(self, server: Any) -> None:
        async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
            self._by_session[id(ctx.session)] = params.level
            log.info("client asked for log messages at %s and above", params.level)
            return types.EmptyResult()

        server._lowlevel_server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, set_level
        )

    def wants(self, session: Any, level: str) -> bool:
        asked = self._by_session.get(id(session), DEFAULT_LEVEL)
        return LEVELS.index(level) >= LEVELS.index(asked)


class Progress:
    """progress(done, total, message), callable from a tool's worker thread."""

    def __init__(self, ctx: Context, levels: LogLevels) -> None:
        self.ctx, self.levels = ctx, levels

    def __call__(self, done: float, total: float | None, message: str) -> None:
        try:
            anyio.from_thread.run(self._send, done, total, message)
        except Exception:  # a client gone mid-call must not fail the work itself
            log.debug("progress not delivered: %s", message, exc_info=True)

    async def _send(self, done: float, total: float | None, message: str) -> None:
        await self.ctx.report_progress(done, total, message)
        session = self.ctx.request_context.session
        if self.levels.wants(session, "info"):
            with warnings.catch_warnings():  # logging is deprecated at 2026-07-28, not gone
                warnings.simplefilter("ignore")
                await session.send_log_message(
                    level="info",
                    data=message,
                    logger="posttrain",
                    related_request_id=self.ctx.request_id,
                )
