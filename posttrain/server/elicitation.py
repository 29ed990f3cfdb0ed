"""Asking the human over MCP: the elicitation an approval resolver returns, and the plans
resolved once per call so the resolver and the tool body read the same plan."""

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit
from pydantic import BaseModel, Field

T = TypeVar("T")


class Approval(BaseModel):
    approve: bool = Field(description="Start this run and allow the spend shown?")


class NoQuestion(BaseModel):
    """What the approval resolver returns when it does not ask the human."""

    reason: Literal["not_needed", "client_cannot_ask"]


def _client_can_elicit(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    elicitation = getattr(caps, "elicitation", None) if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def ask(ctx: Context, question: Callable[[], str | None]) -> Any:
    """What an approval resolver returns: the question to elicit, or why nobody is asked."""
    try:
        q = question()
    except BaseException:  # reported by the tool body, with its message
        q = None
    if q is None:
        return NoQuestion(reason="not_needed")
    if not _client_can_elicit(ctx):
        return NoQuestion(reason="client_cannot_ask")
    return Elicit(q, Approval)


class PlanCache:
    """Plans resolved in the last few seconds, by the call's arguments: an approval resolver
    and its tool body run one after the other for one call, and resolve once between them."""

    TTL_S = 30.0
    SIZE = 64

    def __init__(self) -> None:
        self._plans: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], T], fresh: Callable[[T], bool] | None = None) -> T:
        """The plan of these arguments made in the last TTL_S, unless `fresh(plan)` says what
        it read has changed since (an edited held-out file); else a new one."""
        text = json.dumps(key, sort_keys=True, default=str)
        now = time.time()
        with self._lock:
            found = self._plans.get(text)
        recent = found is not None and now - found[0] < self.TTL_S
        if recent and (fresh is None or fresh(found[1])):
            return found[1]
        value = make()
        with self._lock:
            self._plans[text] = (now, value)
            while len(self._plans) > self.SIZE:
                self._plans.pop(next(iter(self._plans)))
        return value


def decision_of(outcome: Any) -> Literal["approved", "declined"] | None:
    """What the human said through elicitation; None when nobody was asked."""
    if isinstance(outcome, AcceptedElicitation):
        data = outcome.data
        if isinstance(data, Approval):
            return "approved" if data.approve else "declined"
        if isinstance(data, dict) and "approve" in data:
            return "approved" if data["approve"] else "declined"
        return None  # NoQuestion: nobody was asked
    return "declined"  # declined or cancelled the elicitation
