"""The log level each client asked for with `logging/setLevel` (legacy protocol era; at
2026-07-28 a request opts in through its `_meta`, and the SDK filters).

No tool call works long enough to need progress of its own: an evaluation or an export runs
as a job (posttrain.jobs.detached) whose progress get_job reports; smoke_run reports a run's first
stages itself (posttrain.server.app).
"""

import logging
from typing import Any

import mcp_types as types

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
