"""Tiny helpers shared across modules."""

from __future__ import annotations

import contextlib
import difflib
import gc
from collections.abc import Iterable, Iterator

__all__ = ["as_written", "clip", "freeze_heap", "frozen_heap", "json_path", "redact_url", "unknown_name"]


def freeze_heap() -> None:
    """Collect once, then move every object alive now (modules, schemas, compiled patterns, the
    configuration) into the collector's permanent generation (``gc.freeze``), once a long-running
    command has loaded what it needs. A full collection then walks only what was made since: the
    judged worker spent ~5 % of its CPU in the collector, mostly re-walking the start-up heap
    (docs/performance.md, fourth pass). Frozen objects are never collected; they live for the whole
    process anyway."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """:func:`freeze_heap` for the block (``streameval evaluate``'s run), then the frozen objects back
    in the collector's care (``gc.unfreeze``): a process that goes on (a test calling the command
    line) keeps collecting them. Measured: ~10 % of ``evaluate``'s CPU on the six-check workload went
    to full collections re-walking the start-up heap (docs/performance.md, fourth pass)."""
    freeze_heap()
    try:
        yield
    finally:
        gc.unfreeze()


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


_SECRET_PARAM = ("pass", "secret", "token", "key", "auth", "cred", "sig")


def redact_url(url: str) -> str:
    """``url`` with its password, and the value of every query parameter whose name suggests a secret
    (``password``, ``ssl_password``, ``token``, ``api_key``, ``auth``…), replaced by ``***``: for logs and errors."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL we can take apart: show nothing of it
        return "<unparsable URL>"
    if password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if any(word in name.lower() for name, _ in pairs for word in _SECRET_PARAM):
            redacted = [(n, "***" if any(w in n.lower() for w in _SECRET_PARAM) else v) for n, v in pairs]
            parts = parts._replace(query=urlencode(redacted, safe="*/:@"))
    return urlunsplit(parts)


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """ "unknown <kind> 'x'; did you mean 'y'?" when a known name is close, else the list of known names."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    if close:
        return f"unknown {kind} {name!r}; did you mean {' or '.join(repr(c) for c in close)}?"
    return f"unknown {kind} {name!r}; valid {kind}s: {', '.join(names) or '(none)'}"
