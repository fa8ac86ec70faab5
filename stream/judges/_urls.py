"""The plain-HTTP rule for a judge's ``base_url``: a key never travels unencrypted off the machine."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["insecure_http_problem"]


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def insecure_http_problem(base_url: str) -> str | None:
    """Why ``base_url`` must not carry a key (plain http:// to a host other than loopback), or None."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or _loopback(parts.hostname or ""):
        return None
    return (
        f"plain http:// to {parts.hostname} would send the API key unencrypted; use https:// "
        "or set allow_insecure_http: true"
    )
