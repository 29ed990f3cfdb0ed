"""Serving MCP over streamable HTTP: loopback by default, a bearer token anywhere else.

Host and Origin headers are checked (DNS rebinding: a web page must not reach a server on
localhost through a hostile domain), and any address other than loopback requires a bearer
token, compared in constant time (a page cannot know it, so with a token any Host passes
unless POSTTRAIN_ALLOWED_HOSTS lists them). The token comes from the environment, never from a flag
(flags show up in process listings).
"""

from __future__ import annotations

import hmac
import json
import os
from typing import TYPE_CHECKING, Any

from posttrain.core.errors import ConfigError
from posttrain.core.net import is_loopback

if TYPE_CHECKING:  # mcp loads where the app is built: a refusal must not wait on it
    from mcp.server.transport_security import TransportSecuritySettings

TOKEN_ENV = "POSTTRAIN_SERVER_TOKEN"


def security(host: str, port: int, token: str | None = None) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding. With a bearer token a hostile page
    cannot call the server anyway, so any Host is accepted unless POSTTRAIN_ALLOWED_HOSTS
    (comma-separated host[:port] values) names them."""
    from mcp.server.transport_security import TransportSecuritySettings

    named = [
        h.strip() for h in os.environ.get("POSTTRAIN_ALLOWED_HOSTS", "").split(",") if h.strip()
    ]
    if token and not named:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = {f"{host}:{port}", host, *named}
    if is_loopback(host):
        hosts |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    origins = [f"http://{h}" for h in sorted(hosts)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=origins
    )


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": "missing or wrong bearer token"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="posttrain"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def refuse_open_bind(host: str, token: str | None) -> None:
    """An address other than loopback without a bearer token is refused: anyone who reaches
    it could launch paid runs. Light on purpose: `posttrain serve` checks this before it
    builds the server, so the refusal is immediate."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve on {host}, which is not loopback, without a bearer token: set "
            f"{TOKEN_ENV} to a long random secret (clients send it as 'Authorization: Bearer "
            f"...'), or bind 127.0.0.1"
        )


def http_app(server: Any, host: str, port: int, token: str | None) -> Any:
    refuse_open_bind(host, token)
    app = server.streamable_http_app(transport_security=security(host, port, token), host=host)
    return BearerAuth(app, token) if token else app


def serve_http(server: Any, host: str, port: int, token: str | None) -> None:
    import uvicorn

    # The app's lifespan runs the MCP session manager.
    uvicorn.run(http_app(server, host, port, token), host=host, port=port, log_level="warning")
