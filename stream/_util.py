"""Tiny helpers shared across modules."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["clip", "json_path", "redact_url"]


def clip(text: str, limit: int = 2000) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, so reasons stay bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_path(parts: Iterable[str | int]) -> str:
    """``$.a[0].b`` for the path parts ``("a", 0, "b")``."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and errors)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
