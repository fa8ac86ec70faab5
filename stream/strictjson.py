"""Strict JSON checks that pydantic's parser does not make: duplicate keys, NaN/Infinity, deep nesting.

pydantic (jiter) keeps the last of duplicate keys, accepts ``NaN``/``Infinity`` inside free-form
fields such as ``metadata`` and parses any nesting depth. :func:`check_depth` rejects the last
(before any parser runs), :func:`check_strict` the first two.
``check_strict`` runs after pydantic accepted the bytes: it only answers "is this strict JSON?".

Cost (``bench/decode.py``, the 220 valid example events, ~205 bytes each, 2-core box): pydantic
alone 1.7 µs per event, the whole decode with these checks 6.0 µs; the duplicate-key/NaN pass
(stdlib ``json`` with an ``object_pairs_hook`` and a ``parse_constant`` that raises) is 3.7 µs of
it. The worker spends ~200-500 µs per event end to end, so strictness costs ~1-2 % of throughput.
No cheap, sound pre-test for duplicate keys exists (key-like byte patterns also occur inside
strings), so that pass always runs. The depth scan runs only when the event holds more opening
brackets than the depth limit (two ``bytes.count`` calls, 0.35 µs), so ordinary events skip it.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from .errors import InvalidJSON

__all__ = ["DEFAULT_MAX_EVENT_DEPTH", "check_depth", "check_strict", "nesting_depth"]

#: Deepest nesting of arrays/objects an event may have (the event's top-level object is depth 1).
DEFAULT_MAX_EVENT_DEPTH = 64

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class _Reject(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Reject(f"duplicate key {dup[:64]!r}")
    return out


def _constant(name: str) -> NoReturn:
    raise _Reject(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def nesting_depth(raw: bytes) -> int:
    """Deepest array/object nesting in ``raw`` (brackets inside strings do not count).

    Linear in the size of ``raw``; only a scan of bracket tokens, never a recursive parse.
    """
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def check_depth(raw: bytes, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH) -> None:
    """Raise :class:`InvalidJSON` if ``raw`` nests arrays/objects deeper than ``max_depth``.

    Costs two ``bytes.count`` calls unless ``raw`` holds more opening brackets than ``max_depth``
    (only then can it be that deep), which ordinary events never do. Run it before any parser.
    """
    if raw.count(b"[") + raw.count(b"{") > max_depth:
        depth = nesting_depth(raw)
        if depth > max_depth:
            raise InvalidJSON(f"nested {depth} levels deep; the limit is {max_depth}")


def check_strict(raw: bytes, *, event_id: str | None = None) -> None:
    """Raise :class:`InvalidJSON` if ``raw`` (already accepted by pydantic) is not strict JSON.

    Rejects duplicate object keys at any depth and the ``NaN``/``Infinity``/``-Infinity`` literals.
    Call :func:`check_depth` first: this parses recursively. ``event_id`` goes into the error.
    """
    try:
        json.loads(raw, object_pairs_hook=_pairs, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:  # _Reject, or anything stdlib json refuses
        raise InvalidJSON(f"not strict JSON: {exc}", event_id=event_id) from None
