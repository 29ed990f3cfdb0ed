"""Tools and resources declared at module level and added to a server later: the SDK's
`@server.tool()` and `@server.resource()`, for modules that have no server at hand."""

from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer

F = TypeVar("F", bound=Callable[..., Any])


class ToolSet:
    """A module's tools and resources, in the order declared (clients list them so)."""

    def __init__(self) -> None:
        self._tools: list[tuple[Callable[..., Any], dict[str, Any]]] = []
        self._resources: list[tuple[str, Callable[..., Any], dict[str, Any]]] = []

    def tool(self, **options: Any) -> Callable[[F], F]:
        """As `MCPServer.tool(...)`: name, annotations and the rest."""

        def declare(fn: F) -> F:
            self._tools.append((fn, options))
            return fn

        return declare

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """As `MCPServer.resource(uri, ...)`."""

        def declare(fn: F) -> F:
            self._resources.append((uri, fn, options))
            return fn

        return declare

    def add_to(self, server: MCPServer) -> None:
        for fn, options in self._tools:
            server.add_tool(fn, **{"description": nested_doc(fn), **options})
        for uri, fn, options in self._resources:
            server.resource(uri, **options)(fn)


def nested_doc(fn: Callable[..., Any]) -> str | None:
    """A tool's description as clients have always read it. The SDK sends a docstring raw, and
    these tools were nested one level inside the function that built the server until they
    moved to module level: one level more of indentation keeps their text byte for byte."""
    return fn.__doc__.replace("\n    ", "\n        ") if fn.__doc__ else None
