"""Tiny helpers shared across modules."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["as_written", "clip", "json_path", "redact_url", "unknown_name"]


def clip(text: str, limit: int = 2000) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, so reasons stay bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_written(text: str) -> str:
    """``text`` in quotes as a user wrote it: backslashes stay single (``'\\d{6}'``, not repr's doubled
    form); only line breaks and tabs are escaped so a reason stays on one line."""
    return "'" + text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'"


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


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """"unknown <kind> 'x'; did you mean 'y'?" when a known name is close, else the list of known names."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    if close:
        return f"unknown {kind} {name!r}; did you mean {' or '.join(repr(c) for c in close)}?"
    return f"unknown {kind} {name!r}; valid {kind}s: {', '.join(names) or '(none)'}"
