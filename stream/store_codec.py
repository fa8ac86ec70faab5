"""The store's byte formats: the MessagePack figures of an aggregate hash (written by the worker as
increments, packed by the record script, read back by :func:`hash_fields`) and the pointer to an
event's encoded result. Pure functions, no Redis: streameval.store writes with them, the readers
(windows, the API, tests) read with them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from .usage_figures import SLICE_USAGE_TAG, unpack_slice_usage

__all__ = [
    "PACKED_FIELD",
    "SLICE_FIGURES",
    "as_text",
    "hash_fields",
    "is_whole",
    "pack_increments",
    "parse_pointer",
    "pointer",
    "slice_figures",
]

#: the field of an aggregate hash that holds its figures, packed (:func:`hash_fields` reads them)
PACKED_FIELD = "~"


def is_whole(name: str) -> bool:
    """Fields that only ever count events (stored as integers); sums and evaluators' own counters are floats."""
    if ":c:" in name:
        return False
    return (
        name in ("count", "passes")
        or name.startswith(("grade:", "lat:", "gate:"))
        or name.endswith((":count", ":passes", ":errors"))
    )


def pack_increments(inc: dict[str, float]) -> bytes:
    """A MessagePack map ``{field: value}`` (counts as integers, sums as 64-bit floats: both exact); zeros
    left out. The record script unpacks it with ``cmsgpack`` (about twice as fast as ``cjson`` on JSON)."""
    items = [(name, value) for name, value in inc.items() if value]
    n = len(items)
    parts = [_MAP16(0xDE, n) if n > 15 else bytes([0x80 | n])]
    heads = _HEADS
    for name, value in items:
        head = heads.get(name)
        if head is None:
            head = _head(name)
            if len(heads) < 10_000:  # names repeat (evaluators, buckets): encoded once
                heads[name] = head
        parts.append(head[0])
        if head[1] and -(1 << 63) <= value < (1 << 63):
            number = int(value)
            parts.append(_SMALL[number] if 0 <= number <= 0x7F else _INT64(0xD3, number))
        else:
            parts.append(_FLOAT64(0xCB, float(value)))
    return b"".join(parts)


_MAP16 = struct.Struct(">BH").pack
_INT64 = struct.Struct(">Bq").pack
_FLOAT64 = struct.Struct(">Bd").pack
_SMALL = [bytes([i]) for i in range(0x80)]
_HEADS: dict[str, tuple[bytes, bool]] = {}


def _head(name: str) -> tuple[bytes, bool]:
    """A field name as MessagePack (fixstr, str 8 or str 16) and whether its value counts events."""
    raw = name.encode()
    size = len(raw)
    if size < 32:
        tag = bytes([0xA0 | size])
    elif size < 256:
        tag = struct.pack(">BB", 0xD9, size)
    else:
        tag = struct.pack(">BH", 0xDA, size)
    return tag + raw, is_whole(name)


def pointer(digest: bytes, offset: int, length: int, suffix: str) -> bytes:
    """Where an event's encoded result is kept: its digest (8 bytes), offset and length (4 bytes each,
    big-endian) in the string ``rb:{suffix}`` of its pair (streameval.keyspace), then ``suffix``."""
    return digest + struct.pack(">II", offset, length) + suffix.encode()


def parse_pointer(value: bytes | None, digest: bytes | None) -> tuple[int, int, str] | None:
    if not value or len(value) <= 16 or (digest is not None and value[:8] != digest):
        return None
    offset, length = struct.unpack(">II", value[8:16])
    return offset, length, value[16:].decode()


def as_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def hash_fields(raw: Mapping[Any, Any] | Sequence[Any]) -> dict[str, float]:
    """An aggregate hash's figures, from HGETALL (a mapping, or a script's flat [field, value, ...]).

    The record script keeps them packed in one field (:data:`PACKED_FIELD`, a MessagePack map of name
    to number); fields of their own (hashes written before) are added to them.
    """
    if not isinstance(raw, Mapping):
        raw = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    out: dict[str, float] = {}
    for key, value in raw.items():
        name = as_text(key)
        if name == PACKED_FIELD:
            for packed_name, number in _unpack_map(value).items():
                out[packed_name] = out.get(packed_name, 0.0) + number
        else:
            out[name] = out.get(name, 0.0) + float(value)
    return out


#: the figures every slice keeps, first in each slice's value as 4 little-endian doubles (slice_figures)
SLICE_FIGURES = ("count", "sum", "sumsq", "passes")
_FOUR = struct.Struct("<dddd")


def slice_figures(raw: Mapping[Any, Any] | Sequence[Any]) -> dict[str, dict[str, float]]:
    """A slice hash's figures by value (streameval.keyspace ``Keys.slice``), from HGETALL: each field a value;
    each field's value :data:`SLICE_FIGURES` as 4 little-endian doubles, then (only when a feature keeps
    figures of its own per slice) those: the usage figures in their fixed layout
    (streameval.usage_figures.pack_slice_usage), any other as a MessagePack map, as :data:`PACKED_FIELD` holds
    them."""
    if not isinstance(raw, Mapping):
        raw = {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}
    out: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        data = value.encode() if isinstance(value, str) else bytes(value)
        figures = dict(zip(SLICE_FIGURES, _FOUR.unpack_from(data), strict=True))
        if len(data) > _FOUR.size:
            tail = data[_FOUR.size :]
            figures.update(unpack_slice_usage(tail) if tail[:1] == SLICE_USAGE_TAG else _unpack_map(tail))
        out[as_text(key)] = figures
    return out


_FIXED = {
    0xCA: ">f",
    0xCB: ">d",
    0xCC: ">B",
    0xCD: ">H",
    0xCE: ">I",
    0xCF: ">Q",
    0xD0: ">b",
    0xD1: ">h",
    0xD2: ">i",
    0xD3: ">q",
}


def _unpack_map(data: bytes | str) -> dict[str, float]:
    """The MessagePack map (string -> number) that Redis's ``cmsgpack.pack`` makes of a Lua table."""
    buf = data.encode() if isinstance(data, str) else bytes(data)
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(buf):
            raise ValueError("truncated packed figures")
        pos += n
        return buf[pos - n : pos]

    def item() -> Any:
        tag = take(1)[0]
        if tag <= 0x7F or tag >= 0xE0:  # fixint
            return tag if tag <= 0x7F else tag - 0x100
        if 0xA0 <= tag <= 0xBF:  # fixstr
            return take(tag & 0x1F).decode()
        if tag in (0xD9, 0xDA, 0xDB):  # str 8/16/32
            return take(int.from_bytes(take(1 << (tag - 0xD9)), "big")).decode()
        if tag in _FIXED:
            fmt = _FIXED[tag]
            return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
        raise ValueError(f"unexpected MessagePack type 0x{tag:02x} in packed figures")

    tag = take(1)[0]
    if 0x80 <= tag <= 0x8F:
        size = tag & 0x0F
    elif tag in (0xDE, 0xDF):
        size = int.from_bytes(take(2 if tag == 0xDE else 4), "big")
    elif tag == 0x90:  # an empty Lua table packs as an empty array
        size = 0
    else:
        raise ValueError(f"packed figures are not a map (0x{tag:02x})")
    out: dict[str, float] = {}
    for _ in range(size):
        name = item()
        out[str(name)] = float(item())
    return out
