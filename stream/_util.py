"""Tiny helpers shared across modules."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["clip", "json_path"]


def clip(text: str, limit: int = 2000) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, so reasons stay bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_path(parts: Iterable[str | int]) -> str:
    """``$.a[0].b`` for the path parts ``("a", 0, "b")``."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
