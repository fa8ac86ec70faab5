"""Comparing two suite versions on the events both scored (docs/versions.md): pure functions, no I/O.

Per-event compact scores: each record call appends one chunk per versioned pair to a string per pair and
generation (``P{T}:sc:{gen}``, streameval.keyspace), built by :func:`pack_chunk`, read by
:func:`unpack_chunks`. A chunk is columnar, so that packing and reading are a few C-level (un)packs per chunk:

    header: n (uint32) · K (uint8, evaluator scores per event) · length of the ids (uint32)
    then column by column: n event times (uint32, s) · n scores (float32) · n flags (uint8, bit 0
    passed) · K columns of n evaluator scores (uint16: bit 15 passed, bits 0-14 the score × 32766;
    0xFFFF absent) · the n event ids, UTF-8, joined by NUL (a NUL inside an id reads as U+0001)

About 10 bytes + the id + 2 per evaluator per event. When the suite file has ``segments:``
(docs/segments.md), each score chunk is followed by a chunk of its events' slice values (:func:`pack_slices`):
a header of the same shape whose n is :data:`SLICES_MARK` (a reader that does not know it stops there), the
length of the body, then per dimension its name and the distinct values of the chunk (UTF-8, NUL-joined,
after a uint32 length) and one uint16 per event, the index of its value: 2 bytes per event and dimension.
A redelivered event may be appended again (the
append goes with the record call, before Redis says whether the event was new): readers keep an id's
first record, which is what was counted. The evaluator names of a pair are kept once (``P{T}:scn``), in
the order of the records' evaluator scores.

:func:`compare` takes two versions' records and reports n, the mean difference with a paired 95 % CI,
pass→fail and fail→pass flips with example ids, Cohen's κ of pass/fail, Pearson and Spearman of the
scores, and per-evaluator deltas; with no shared event, an empty comparison and the reason.
:func:`compare_slices` does it once per value of one slice dimension.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import accumulate
from operator import itemgetter, mul, sub
from typing import Any

from ...stats import moments, t_quantile_975

__all__ = [
    "ABSENT",
    "MAX_FLIP_EXAMPLES",
    "SLICES_MARK",
    "Compact",
    "compact",
    "compare",
    "compare_slices",
    "kappa",
    "pack_chunk",
    "pack_slices",
    "rank",
    "unpack_chunks",
]

#: one event in one version: (event time s, score, passed, evaluator scores as packed uint16 ...)
Compact = tuple[Any, ...]
_HEAD = struct.Struct(">IBI")
_SCALE = 32766  # so that a passed 1.0 (0xFFFE) is never ABSENT
#: an evaluator score the event does not have (e.g. the judge panel's on an event it did not sample)
ABSENT = 0xFFFF
#: most example ids listed per flip direction
MAX_FLIP_EXAMPLES = 10
#: the n of a chunk of slice values (it follows the score chunk whose events it describes)
SLICES_MARK = 0xFFFFFFFF
#: most distinct values of one dimension in one chunk; further ones are kept as ``(other)``
_MAX_CHUNK_VALUES = 0xFFFF
#: the value of an event that has none in a dimension (docs/segments.md)
_MISSING = "(missing)"
_OTHER = "(other)"


def _ev(score: float, passed: bool) -> int:
    return (0x8000 if passed else 0) | round(min(1.0, max(0.0, score)) * _SCALE)


def compact(
    event_time: float, score: float, passed: bool, evaluators: Sequence[tuple[float, bool]]
) -> Compact:
    """One event's record as :func:`unpack_chunks` returns it (the offline comparison builds them so)."""
    return (
        max(0, min(int(event_time), 0xFFFFFFFF)),
        float(struct.unpack(">f", struct.pack(">f", score))[0]),
        1 if passed else 0,
        *(_ev(s, p) for s, p in evaluators),
    )


def pack_chunk(rows: Sequence[tuple[str, float, float, bool, Sequence[tuple[float, bool]]]]) -> bytes:
    """One chunk of ``(event id, event time, score, passed, [(evaluator score, passed), ...])`` rows."""
    n = len(rows)
    k = min(255, max((len(r[4]) for r in rows), default=0))
    scale = _SCALE
    columns: list[list[int]] = [[] for _ in range(k)]
    for row in rows:
        evaluators = row[4]
        for j in range(k):
            if j < len(evaluators):
                score, passed = evaluators[j]
                columns[j].append(
                    (0x8000 if passed else 0)
                    | round((0.0 if score < 0 else 1.0 if score > 1 else score) * scale)
                )
            else:
                columns[j].append(ABSENT)
    ids = b"\0".join(r[0].encode().replace(b"\0", b"\1") for r in rows)
    return b"".join(
        (
            _HEAD.pack(n, k, len(ids)),
            struct.pack(f">{n}I", *(max(0, min(int(r[1]), 0xFFFFFFFF)) for r in rows)),
            struct.pack(f">{n}f", *(r[2] for r in rows)),
            bytes(1 if r[3] else 0 for r in rows),
            *(struct.pack(f">{n}H", *column) for column in columns),
            ids,
        )
    )


def pack_slices(dimensions: Sequence[str], values: Sequence[Sequence[str]]) -> bytes:
    """The chunk of slice values that follows a score chunk: ``values[i]`` is its row i's value per dimension
    (in the order of ``dimensions``; an empty tuple: ``(missing)`` in each)."""
    n = len(values)
    parts: list[bytes] = [bytes((len(dimensions),))]
    for d, name in enumerate(dimensions):
        table: dict[str, int] = {}
        indexes = []
        for row in values:
            value = row[d] if d < len(row) else _MISSING
            index = table.get(value)
            if index is None:
                if len(table) >= _MAX_CHUNK_VALUES - 1:
                    value = _OTHER
                index = table.setdefault(value, len(table))
            indexes.append(index)
        names = "\0".join((name, *table)).encode()
        parts += [struct.pack(">I", len(names)), names, struct.pack(f">{n}H", *indexes)]
    body = b"".join(parts)
    return _HEAD.pack(SLICES_MARK, 0, len(body)) + body


def _unpack_slices(data: bytes, ids: Sequence[str]) -> dict[str, dict[str, str]] | None:
    """Each id's value per dimension, from a slice chunk's body for a score chunk of ``ids`` (None: malformed)."""
    n, pos = len(ids), 1
    if not data:
        return None
    columns: list[tuple[str, list[str]]] = []
    try:
        for _ in range(data[0]):
            (length,) = struct.unpack_from(">I", data, pos)
            name, *table = data[pos + 4 : pos + 4 + length].decode(errors="replace").split("\0")
            pos += 4 + length
            indexes = struct.unpack_from(f">{n}H", data, pos)
            pos += 2 * n
            columns.append((name, [table[i] for i in indexes]))
    except (struct.error, IndexError):
        return None
    out: dict[str, dict[str, str]] = {}
    for row, event_id in enumerate(ids):
        out.setdefault(event_id, {name: column[row] for name, column in columns})  # an id's first record
    return out


def unpack_chunks(
    data: bytes,
    *,
    since: float | None = None,
    until: float | None = None,
    slices: dict[str, dict[str, str]] | None = None,
) -> dict[str, Compact]:
    """Every record of a string of chunks, an id's first record kept; with ``since``/``until``, only
    events whose time is in [since, until). A chunk that does not add up ends the reading. With ``slices``,
    fills it with each returned id's slice values ({dimension: value}) where its record has them."""
    chunks: list[dict[str, Compact]] = []
    chunk_slices: list[dict[str, dict[str, str]]] = []
    ids: list[str] = []
    pos, end = 0, len(data)
    while pos + _HEAD.size <= end:
        n, k, ids_len = _HEAD.unpack_from(data, pos)
        body = pos + _HEAD.size
        if n == SLICES_MARK:  # the slice values of the score chunk just read
            if body + ids_len > end:
                break
            if slices is not None and chunks and len(chunk_slices) == len(chunks) - 1:
                found = _unpack_slices(data[body : body + ids_len], ids)
                if found is None:
                    break
                chunk_slices.append({i: found[i] for i in chunks[-1]})
            pos = body + ids_len
            continue
        if slices is not None and len(chunk_slices) < len(chunks):
            chunk_slices.append({})  # a chunk written without slice values
        stop = body + n * (9 + 2 * k) + ids_len
        if stop > end or n == 0:
            break
        times = struct.unpack_from(f">{n}I", data, body)
        scores = struct.unpack_from(f">{n}f", data, body + 4 * n)
        flags = data[body + 8 * n : body + 9 * n]
        evs = [struct.unpack_from(f">{n}H", data, body + 9 * n + 2 * n * j) for j in range(k)]
        ids = data[stop - ids_len : stop].decode(errors="replace").split("\0")
        if len(ids) != n:
            break
        rows = zip(times, scores, flags, *evs, strict=True)
        chunk = dict(
            zip(reversed(ids), reversed(list(rows)), strict=True)
        )  # an id twice in a chunk: its first record
        if since is not None or until is not None:
            low, high = -math.inf if since is None else since, math.inf if until is None else until
            chunk = {i: r for i, r in chunk.items() if low <= r[0] < high}
        chunks.append(chunk)
        pos = stop
    out: dict[str, Compact] = {}
    for chunk in reversed(chunks):  # records of earlier chunks win
        out.update(chunk)
    if slices is not None:
        for values in reversed(chunk_slices):
            slices.update(values)
    return out


def rank(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based; ties share their mean rank), as Spearman's ρ needs (C-level loops only)."""
    counts = Counter(values)
    distinct = sorted(counts)
    sizes = [counts[v] for v in distinct]
    before = accumulate(sizes, initial=0)
    mean_rank = {
        v: start + (size + 1) / 2 for v, start, size in zip(distinct, before, sizes, strict=False)
    }  # before: one longer
    return list(map(mean_rank.__getitem__, values))


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx, syy = math.fsum(map(mul, dx, dx)), math.fsum(map(mul, dy, dy))
    if sxx <= 1e-24 or syy <= 1e-24:
        return None
    r = math.fsum(map(mul, dx, dy)) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


def kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's κ of two pass/fail labelings; None when chance agreement is total (one constant label on both)."""
    n = len(a)
    if n == 0:
        return None
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0 - 1e-12:
        return None
    return (agree - chance) / (1 - chance)


def compare(
    a: Mapping[str, Compact],
    b: Mapping[str, Compact],
    *,
    names_a: Sequence[str] = (),
    names_b: Sequence[str] = (),
    labels: tuple[str, str] = ("a", "b"),
) -> dict[str, Any]:
    """Version ``b`` against version ``a`` on the ids both scored (module docstring). Differences are b - a."""
    shared = list(a.keys() & b.keys())
    n = len(shared)
    out: dict[str, Any] = {"a": labels[0], "b": labels[1], "n": n, "n_a": len(a), "n_b": len(b)}
    if n == 0:
        reason = (
            "version a has no retained scores"
            if not a
            else "version b has no retained scores"
            if not b
            else "the two versions scored no event in common"
        )
        return {
            **out,
            "empty": True,
            "reason": reason,
            "mean_a": None,
            "mean_b": None,
            "mean_diff": None,
            "ci_low": None,
            "ci_high": None,
            "pass_rate_a": None,
            "pass_rate_b": None,
            "pass_to_fail": 0,
            "fail_to_pass": 0,
            "pass_to_fail_ids": [],
            "fail_to_pass_ids": [],
            "kappa": None,
            "pearson": None,
            "spearman": None,
            "evaluators": {},
        }
    ra = list(map(a.__getitem__, shared))
    rb = list(map(b.__getitem__, shared))
    xs = list(map(itemgetter(1), ra))
    ys = list(map(itemgetter(1), rb))
    diffs = list(map(sub, ys, xs))
    m = moments(n, math.fsum(diffs), math.fsum(map(mul, diffs, diffs)))
    half = t_quantile_975(n) * m.std / math.sqrt(n) if n >= 2 else None
    pa = [r[2] == 1 for r in ra]
    pb = [r[2] == 1 for r in rb]
    to_fail = sorted(i for i, x, y in zip(shared, pa, pb, strict=True) if x and not y)
    to_pass = sorted(i for i, x, y in zip(shared, pa, pb, strict=True) if y and not x)
    return {
        **out,
        "empty": False,
        "reason": None,
        "mean_a": math.fsum(xs) / n,
        "mean_b": math.fsum(ys) / n,
        "mean_diff": m.mean,
        "ci_low": None if half is None else m.mean - half,
        "ci_high": None if half is None else m.mean + half,
        "pass_rate_a": sum(pa) / n,
        "pass_rate_b": sum(pb) / n,
        "pass_to_fail": len(to_fail),
        "fail_to_pass": len(to_pass),
        "pass_to_fail_ids": to_fail[:MAX_FLIP_EXAMPLES],
        "fail_to_pass_ids": to_pass[:MAX_FLIP_EXAMPLES],
        "kappa": kappa(pa, pb),
        "pearson": _pearson(xs, ys),
        "spearman": _pearson(rank(xs), rank(ys)),
        "evaluators": _evaluator_deltas(ra, rb, names_a, names_b),
    }


_PASSED = 0x8000


def _column(rows: Sequence[Compact], index: int, uniform: bool) -> list[Any]:
    """Field ``index`` of every record (records of one width: a C-level map; else :data:`ABSENT` where short)."""
    if uniform:
        return list(map(itemgetter(index), rows))
    return [r[index] if len(r) > index else ABSENT for r in rows]


def _evaluator_deltas(
    ra: Sequence[Compact], rb: Sequence[Compact], names_a: Sequence[str], names_b: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per evaluator both versions have (by name), on the events where both have its score: n, the means,
    their difference, the pass rates; evaluators of one side only are named as such."""
    index_b = {name: j for j, name in enumerate(names_b)}
    widths_a, widths_b = (min(map(len, ra)), max(map(len, ra))), (min(map(len, rb)), max(map(len, rb)))
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names_a):
        j = index_b.get(name)
        if j is None or 3 + i >= widths_a[1] or 3 + j >= widths_b[1]:
            continue
        xs = _column(ra, 3 + i, widths_a[0] == widths_a[1])
        ys = _column(rb, 3 + j, widths_b[0] == widths_b[1])
        if ABSENT in xs or ABSENT in ys:
            kept = [(x, y) for x, y in zip(xs, ys, strict=True) if x != ABSENT and y != ABSENT]
            xs, ys = [x for x, _ in kept], [y for _, y in kept]
        count = len(xs)
        if not count:
            continue
        # each value is 0x8000 x passed + the scaled score: sums and pass counts without a Python loop
        passes_a, passes_b = sum(map(_PASSED.__and__, xs)) >> 15, sum(map(_PASSED.__and__, ys)) >> 15
        sa = (sum(xs) - (passes_a << 15)) / _SCALE
        sb = (sum(ys) - (passes_b << 15)) / _SCALE
        out[name] = {
            "n": count,
            "mean_a": sa / count,
            "mean_b": sb / count,
            "mean_diff": (sb - sa) / count,
            "pass_rate_a": passes_a / count,
            "pass_rate_b": passes_b / count,
        }
    known_a = set(names_a)
    for name in names_a:
        if name not in index_b:
            out[name] = {"n": 0, "only_in": "a"}
    for name in names_b:
        if name not in known_a:
            out[name] = {"n": 0, "only_in": "b"}
    return out


def compare_slices(
    a: Mapping[str, Compact],
    b: Mapping[str, Compact],
    of: Mapping[str, str],
    *,
    names_a: Sequence[str] = (),
    names_b: Sequence[str] = (),
    labels: tuple[str, str] = ("a", "b"),
    max_values: int = 1000,
) -> list[dict[str, Any]]:
    """:func:`compare` once per slice value: ``of`` maps an event id to its value in one dimension (events
    without one are left out). Each comparison has its ``value``; the ``max_values`` values with most events
    are kept, the events of the others are compared together as ``(other)``. Worst first: the largest drop
    of the mean score (b - a) first, slices without a shared event last."""
    groups: dict[str, tuple[dict[str, Compact], dict[str, Compact]]] = {}
    for side, records in enumerate((a, b)):
        for event_id, record in records.items():
            value = of.get(event_id)
            if value is not None:
                groups.setdefault(value, ({}, {}))[side][event_id] = record
    if len(groups) > max_values:
        ranked = sorted(groups, key=lambda v: (-len(groups[v][0].keys() | groups[v][1].keys()), v))
        other: tuple[dict[str, Compact], dict[str, Compact]] = groups.pop(_OTHER, ({}, {}))
        for value in ranked[max_values - 1 :]:
            if value in groups:
                sa, sb = groups.pop(value)
                other[0].update(sa)
                other[1].update(sb)
        groups[_OTHER] = other
    rows = [
        {"value": value, **compare(sa, sb, names_a=names_a, names_b=names_b, labels=labels)}
        for value, (sa, sb) in groups.items()
    ]
    rows.sort(key=lambda r: (r["mean_diff"] is None, r["mean_diff"] or 0.0, r["value"]))
    return rows
