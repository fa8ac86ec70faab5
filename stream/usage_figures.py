"""A window's usage figures of the monitored calls (docs/usage.md): pure functions over the figures the
usage feature (streameval.features.usage) adds to each event's increments, under names starting ``use:``,
so that the pair's window hash and each of its slices (streameval.features.segments) sum them exactly like
their own figures. A window without such names has no ``usage`` (nothing configured: nothing changes).

Names: ``use:n`` events with a usage block; ``use:in``, ``use:out``, ``use:cin``, ``use:rt`` token sums
(input, output, cached input, reasoning); ``use:c`` the cost sum and ``use:p:{currency}`` how many events
had a cost in that currency; ``use:d{bucket}`` / ``use:t{bucket}`` durations and times to first token in
log buckets (``use:D``/``use:T``: coarser, what slices keep); ``use:f:{reason}`` finish reasons.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping

from .models import AggregateUsage

__all__ = [
    "PREFIX",
    "SLICE_REASONS",
    "SLICE_USAGE_TAG",
    "bucket",
    "bucket_value",
    "pack_slice_usage",
    "unpack_slice_usage",
    "usage_of",
]

#: the names of the usage figures start with this (a slice keeps names with this prefix too)
PREFIX = "use:"

#: durations are counted in buckets 10^(1/20) wide (20 a decade) from 1 ms: a percentile read at a bucket's
#: geometric middle is within ±5.9 % of the exact one (the bucket's half width, 10^(1/40) - 1); bucket 0
#: holds everything under 1 ms and is read as 0.5 ms. Slices keep them 10 a decade (±12.2 %: 10^(1/20) - 1),
#: under names of their own (``use:D``, ``use:T``), half as many figures per slice value
FINE = 20
COARSE = 10


def bucket(ms: float, per_decade: int = FINE) -> int:
    """The duration bucket of ``ms`` (see above)."""
    if ms < 1.0:
        return 0
    return 1 + int(math.log10(ms) * per_decade)


def bucket_value(index: int, per_decade: int = FINE) -> float:
    """The value a percentile falling in bucket ``index`` is read as: its geometric middle (0.5 ms for 0)."""
    if index <= 0:
        return 0.5
    return float(10 ** ((index - 0.5) / per_decade))


def _percentile(buckets: Mapping[int, float], q: float, per_decade: int = FINE) -> float | None:
    """The nearest-rank ``q`` quantile of bucket counts, read at the bucket's middle."""
    total = sum(buckets.values())
    if total <= 0:
        return None
    rank = max(1.0, math.ceil(q * total - 1e-9))
    seen = 0.0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            return bucket_value(index, per_decade)
    return bucket_value(max(buckets), per_decade)


def usage_of(fields: Mapping[str, float], count: int) -> AggregateUsage | None:
    """The window's usage from its figures (``count``: its events); None when it has no usage figure."""
    durations: dict[int, float] = {}
    firsts: dict[int, float] = {}
    coarse: dict[int, float] = {}
    coarse_firsts: dict[int, float] = {}
    reasons: dict[str, int] = {}
    sums: dict[str, float] = {}
    currency: str | None = None
    priced = 0.0
    found = False
    for name, value in fields.items():
        if not name.startswith(PREFIX):
            continue
        found = True
        rest = name[4:]
        if not value:
            continue
        if rest.startswith("f:"):
            reasons[rest[2:]] = round(value)
        elif rest.startswith("p:"):
            currency, priced = rest[2:] or None, priced + value
        elif rest[:1] == "d" and rest[1:].isdigit():
            durations[int(rest[1:])] = value
        elif rest[:1] == "t" and rest[1:].isdigit():
            firsts[int(rest[1:])] = value
        elif rest[:1] == "D" and rest[1:].isdigit():
            coarse[int(rest[1:])] = value
        elif rest[:1] == "T" and rest[1:].isdigit():
            coarse_firsts[int(rest[1:])] = value
        else:
            sums[rest] = value
    if not found:
        return None
    # a slice has the coarse buckets alone; a pair both, and reads the fine ones
    d_buckets, d_scale = (durations, FINE) if durations else (coarse, COARSE)
    t_buckets, t_scale = (firsts, FINE) if firsts else (coarse_firsts, COARSE)
    n = max(0, round(priced))
    cost = max(0.0, sums.get("c", 0.0))
    return AggregateUsage(
        events=max(0, round(sums.get("n", 0.0))),
        input_tokens=max(0, round(sums.get("in", 0.0))),
        output_tokens=max(0, round(sums.get("out", 0.0))),
        cached_input_tokens=max(0, round(sums.get("cin", 0.0))),
        reasoning_tokens=max(0, round(sums.get("rt", 0.0))),
        currency=currency,
        cost=cost,
        priced=n,
        unpriced=max(0, count - n),
        cost_per_event=cost / n if n else None,
        duration_p50_ms=_percentile(d_buckets, 0.5, d_scale),
        duration_p95_ms=_percentile(d_buckets, 0.95, d_scale),
        duration_p99_ms=_percentile(d_buckets, 0.99, d_scale),
        ttft_p50_ms=_percentile(t_buckets, 0.5, t_scale),
        ttft_p95_ms=_percentile(t_buckets, 0.95, t_scale),
        finish_reasons=dict(sorted(reasons.items())),
    )


#: finish reasons in the order of their place in a slice's usage figures (:func:`pack_slice_usage`); the
#: usage feature's annotator keeps exactly these by name, any other as ``(other)`` (last). Append only: the
#: place of a reason is part of the format of the slices' hashes
SLICE_REASONS = (
    "stop",
    "length",
    "content_filter",
    "tool_calls",
    "function_call",
    "error",
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "refusal",
    "pause_turn",
    "safety",
    "recitation",
    "(other)",
)
_REASON_AT = {name: i for i, name in enumerate(SLICE_REASONS)}
#: the sums of a slice's usage figures, in their fixed places; the events with a cost in the currency last
_SLICE_SUMS = ("use:n", "use:in", "use:out", "use:cin", "use:rt", "use:c")
#: the first byte of a slice's usage figures (after its 4 doubles; a MessagePack map never starts with it)
SLICE_USAGE_TAG = b"u"


_SUM, _PRICED, _NONE = -1, -2, -3
#: a usage figure's name -> (kind, place): a sum, the events with a cost, or a range (0 reasons, 1 durations,
#: 2 times to first token) and the place in it
_PLACES: dict[str, tuple[int, int]] = {}


def _place(name: str) -> tuple[int, int]:
    rest = name[4:] if name.startswith(PREFIX) else ""
    if name in _SLICE_SUMS:
        return _SUM, _SLICE_SUMS.index(name)
    if rest.startswith("p:"):
        return _PRICED, 0
    if rest.startswith("f:"):
        return 0, _REASON_AT.get(rest[2:], len(SLICE_REASONS) - 1)
    if rest[:1] in ("D", "T") and rest[1:].isdigit():
        return (1 if rest[0] == "D" else 2), int(rest[1:])
    return _NONE, 0


def _ranged(found: Mapping[int, float]) -> list[float]:
    """A range of places: its first, its length, then a count per place (0, 0: none)."""
    if not found:
        return [0.0, 0.0]
    lo, hi = min(found), max(found)
    return [float(lo), float(hi - lo + 1), *(float(found.get(i, 0.0)) for i in range(lo, hi + 1))]


def pack_slice_usage(fields: Mapping[str, float]) -> bytes:
    """A slice value's usage figures (``use:*`` names, the coarse buckets) in a fixed layout of doubles, which
    the record script adds place by place without naming them (streameval.features.segments): the tag, the
    currency's length (a byte) and UTF-8 bytes, then little-endian doubles: the sums of ``_SLICE_SUMS``, the
    events with a cost, then three ranges (:func:`_ranged`): finish reasons (places of :data:`SLICE_REASONS`),
    coarse duration buckets, coarse time-to-first-token buckets."""
    sums = [0.0] * len(_SLICE_SUMS)
    currency, priced = "", 0.0
    ranges: tuple[dict[int, float], dict[int, float], dict[int, float]] = ({}, {}, {})
    places = _PLACES
    for name, value in fields.items():
        place = places.get(name)
        if place is None:
            place = _place(name)
            if len(places) < 10_000:  # names repeat: looked at once
                places[name] = place
        kind, at = place
        if kind == _SUM:
            sums[at] += value
        elif kind == _PRICED:
            currency, priced = name[6:], priced + value
        elif kind >= 0:
            found = ranges[kind]
            found[at] = found.get(at, 0.0) + value
    reasons, durations, firsts = ranges
    raw = currency.encode()[:255]
    numbers = [*sums, priced, *_ranged(reasons), *_ranged(durations), *_ranged(firsts)]
    return SLICE_USAGE_TAG + bytes([len(raw)]) + raw + struct.pack(f"<{len(numbers)}d", *numbers)


def unpack_slice_usage(data: bytes) -> dict[str, float]:
    """The ``use:*`` figures of :func:`pack_slice_usage`'s layout (zeros left out, ``use:n`` always there)."""
    if data[:1] != SLICE_USAGE_TAG or len(data) < 2:
        raise ValueError("not a slice's usage figures")
    start = 2 + data[1]
    currency = data[2:start].decode()
    if (len(data) - start) % 8:
        raise ValueError("truncated slice usage figures")
    numbers = struct.unpack_from(f"<{(len(data) - start) // 8}d", data, start)
    out = {"use:n": numbers[0]}
    for name, value in zip(_SLICE_SUMS[1:], numbers[1 : len(_SLICE_SUMS)], strict=True):
        if value:
            out[name] = value
    at = len(_SLICE_SUMS)
    if numbers[at]:
        out[f"use:p:{currency}"] = numbers[at]
    at += 1
    for kind in ("f", "D", "T"):
        lo, n = int(numbers[at]), int(numbers[at + 1])
        for i, value in enumerate(numbers[at + 2 : at + 2 + n]):
            if value:
                name = f"use:f:{SLICE_REASONS[lo + i]}" if kind == "f" else f"use:{kind}{lo + i}"
                out[name] = value
        at += 2 + n
    return out
