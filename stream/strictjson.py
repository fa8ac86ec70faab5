"""Strict JSON checks that pydantic's parser does not make: duplicate keys, NaN/Infinity, overflowing
numbers, deep nesting.

pydantic (jiter) keeps the last of duplicate keys, accepts ``NaN``/``Infinity`` inside free-form
fields such as ``metadata``, reads ``1e999`` as infinity and parses any nesting depth.
:func:`check_depth` rejects the last (before any parser runs), :func:`check_strict` the others;
:func:`loads_strict` parses a document with every check (the API's request bodies).
``check_strict`` runs after pydantic accepted the bytes: it only answers "is this strict JSON?".

Every check is linear in the size of the input, with no backtracking regex: an event of up to the
size limit costs at most ~0.1 s of CPU whatever its bytes (tests/core/test_hostile.py).

Cost (``bench/decode.py``, process CPU, 2-core box). The 220 valid example events (~205 bytes):
pydantic alone 2.2 µs per event, the whole decode 9.0 µs, of which the duplicate-key/NaN/number pass
(stdlib ``json`` with an ``object_pairs_hook``, a ``parse_constant`` that raises and number hooks)
is 5.1 µs. No cheap, sound pre-test for duplicate keys exists (key-like byte patterns also occur
inside strings), so that pass always runs. The depth scan runs only when the event holds more opening
brackets than the depth limit (two ``bytes.count`` calls, 0.35 µs), so ordinary events skip it.
1 MiB adversarial events: 7-36 ms for unclosed strings, backslash runs and bracket storms (the old
regex scan took ~1 h for 65 ``{`` then ``"\\`` repeated); 77-114 ms for a ``metadata`` list of
350,000 empty arrays or objects, where building the objects (twice: pydantic, then the
strict pass) is the cost.
"""

from __future__ import annotations

import json
import math
from array import array
from itertools import accumulate
from typing import Any, NoReturn

import orjson

from .errors import InvalidJSON, StreamEvalError

__all__ = [
    "DEFAULT_MAX_EVENT_DEPTH",
    "check_depth",
    "check_strict",
    "loads_strict",
    "nesting_depth",
    "parse_plain",
]

#: Deepest nesting of arrays/objects an event may have (the event's top-level object is depth 1).
DEFAULT_MAX_EVENT_DEPTH = 64

# Bytes that are neither a quote nor a bracket: deleted before the depth is counted.
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')
# Brackets as signed bytes: +1 opens, -1 (0xff) closes.
_SIGNED = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class _Reject(StreamEvalError, ValueError):  # caught as a ValueError with stdlib json's own
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


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 32 else f"{text[:32]}..."
        raise _Reject(f"number {shown} overflows a double (RFC 8259 has no Infinity)")
    return value


def _int(text: str) -> int:
    value = int(text)  # over 4,300 digits: ValueError from Python itself
    if len(text) > 308:  # only then can it be beyond a double (~1.8e308)
        try:
            float(value)
        except OverflowError:
            raise _Reject(f"number {text[:32]}... ({len(text)} digits) overflows a double") from None
    return value


def nesting_depth(raw: bytes) -> int:
    """Deepest array/object nesting in ``raw`` (brackets inside strings do not count).

    Linear in the size of ``raw`` and done by C-level bytes operations, never a regex or a recursive
    parse: escaped backslashes, then escaped quotes are dropped, so every quote left delimits a
    string; everything but quotes and brackets is dropped; adjacent quote pairs (an empty string, or
    a gap between strings without brackets) are dropped; the pieces between quotes at odd positions
    are inside strings. What is left are the brackets outside strings, whose running sum is the depth.
    On malformed input (a backslash outside a string, an unclosed string) the answer is still defined
    (an unclosed string runs to the end) and the parser rejects the bytes anyway.
    """
    s = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURAL).replace(b'""', b"")
    if b'"' in s:
        s = b"".join(s.split(b'"')[::2])
    return max(accumulate(array("b", s.translate(_SIGNED)), initial=0))


def check_depth(raw: bytes, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH) -> None:
    """Raise :class:`InvalidJSON` if ``raw`` nests arrays/objects deeper than ``max_depth``.

    Costs two ``bytes.count`` calls unless ``raw`` holds more opening brackets than ``max_depth``
    (only then can it be that deep), which ordinary events never do. Run it before any parser.
    """
    if raw.count(b"[") + raw.count(b"{") > max_depth:
        depth = nesting_depth(raw)
        if depth > max_depth:
            raise InvalidJSON(f"nested {depth} levels deep; the limit is {max_depth}")


# One decoder for every call: json.loads with hooks builds a JSONDecoder and its scanner per call (~20 %
# of an ordinary event's strict pass). The scanner keeps no state between calls.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
)


def _loads(raw: bytes) -> Any:
    # the number hooks cost ~0.1 µs on an ordinary event (a pre-test of the bytes cost more)
    if isinstance(raw, bytes | bytearray):  # what json.loads does with bytes, with the shared decoder
        return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    return json.loads(
        raw, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
    )


def check_strict(raw: bytes, *, event_id: str | None = None) -> None:
    """Raise :class:`InvalidJSON` if ``raw`` (already accepted by pydantic) is not strict JSON.

    Rejects duplicate object keys at any depth, the ``NaN``/``Infinity``/``-Infinity`` literals and
    numbers beyond the range of a double (``1e999``, a 400-digit integer), which would read as
    infinity. Call :func:`check_depth` first: this parses recursively. ``event_id`` goes into the error.
    """
    try:
        _loads(raw)
    except (ValueError, RecursionError) as exc:  # _Reject, or anything stdlib json refuses
        raise InvalidJSON(f"not strict JSON: {exc}", event_id=event_id) from None


def parse_plain(raw: bytes) -> Any:
    """``raw`` parsed by the strict pass (duplicate keys, NaN/Infinity, overflowing numbers), when it is
    plainly what pydantic's JSON parser reads the same way; else None (the caller then decodes the usual
    way, which gives the verdict and its reason).

    Plain: ``bytes`` starting with ``{``, and either exactly orjson's own writing of what it reads
    (:func:`_canonical`), or valid UTF-8 (no encoded surrogates) with no string holding a lone surrogate
    (pydantic rejects ``"\\ud800"``, stdlib json does not) and accepted by the strict pass.
    Such a document is read by both parsers into the same values (tests/core/test_decode_once.py);
    depth is not checked here (the stdlib parser stops at the recursion limit: None).
    """
    if type(raw) is not bytes or raw[:1] != b"{":
        return None
    document = _canonical(raw)
    if document is not None:
        return document
    try:
        document = _DECODER.decode(raw.decode("utf-8"))
        plain = _surrogate_free(document)
    except (ValueError, RecursionError):  # UnicodeDecodeError, _Reject, or what stdlib json refuses
        return None
    return document if plain else None


def _canonical(raw: bytes) -> Any:
    """``raw`` parsed by orjson when it is exactly what orjson writes for what it read (compact, orjson's
    escapes and number forms: what orjson, and mostly JSON.stringify, produce), else None.

    Such bytes are strict JSON by construction: orjson never writes a duplicate key, NaN or an
    overflowing number, and refuses lone surrogates both ways; a number it would read differently
    (beyond 64-bit integers, infinity) is written differently. It is cheaper than the stdlib pass
    (~2 µs of a 3.5 kB event, orjson's parse and write against the stdlib parse and the text decoding).
    A cheap look first: the first key followed by ``": "`` (Python's json.dumps) is not compact.
    """
    if raw[1:2] != b'"':
        return None
    colon = raw.find(b'":', 2)
    if colon < 0 or raw[colon + 2 : colon + 3] == b" ":
        return None
    try:
        document = orjson.loads(raw)
        if type(document) is dict and orjson.dumps(document) == raw:
            return document
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    return None


def _surrogate_free(value: Any) -> bool:
    """No string (key or value) in ``value`` holds a surrogate code point. ASCII strings cannot
    (``isascii`` reads a flag); others are encoded, which refuses surrogates."""
    if type(value) is dict:
        for key, item in value.items():
            if not key.isascii() and not _encodes(key):
                return False
            if type(item) is str:
                if not item.isascii() and not _encodes(item):
                    return False
            elif (type(item) is dict or type(item) is list) and not _surrogate_free(item):
                return False
        return True
    for item in value:  # a list
        if type(item) is str:
            if not item.isascii() and not _encodes(item):
                return False
        elif (type(item) is dict or type(item) is list) and not _surrogate_free(item):
            return False
    return True


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def loads_strict(raw: bytes, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH) -> Any:
    """Parse ``raw`` as strict JSON (depth, duplicate keys, NaN/Infinity, overflowing numbers).

    Raises :class:`InvalidJSON` with the reason. For documents that are not events, e.g. API bodies.
    """
    check_depth(raw, max_depth=max_depth)
    try:
        return _loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidJSON(f"not strict JSON: {exc}") from None
