"""Whether a host is this machine: the server binds without a token only there, and a judge
there is free."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """localhost, 127.x or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
