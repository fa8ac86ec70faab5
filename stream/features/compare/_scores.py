"""Comparing two suite versions on the events both scored (docs/versions.md): pure functions, no I/O.

Per-event compact scores: each record call appends one chunk per versioned pair to a string per pair and
generation (``P{T}:sc:{gen}``, streameval.keyspace), built by :func:`pack_chunk`, read by
:func:`unpack_chunks`. A chunk is columnar, so that packing and reading are a few C-level (un)packs per chunk:

    header: n (uint32) · K (uint8, evaluator scores per event) · length of the ids (uint32)
    then column by column: n event times (uint32, s) · n scores (float32) · n flags (uint8, bit 0
    passed) · K columns of n evaluator scores (uint16: bit 15 passed, bits 0-14 the score × 32766;
    0xFFFF absent) · the n event ids, UTF-8, joined by NUL (a NUL inside an id reads as U+0001)

About 10 bytes + the id + 2 per evaluator per event. A redelivered event may be appended again (the
append goes with the record call, before Redis says whether the event was new): readers keep an id's
first record, which is what was counted. The evaluator names of a pair are kept once (``P{T}:scn``), in
the order of the records' evaluator scores.

:func:`compare` takes two versions' records and reports n, the mean difference with a paired 95 % CI,
pass→fail and fail→pass flips with example ids, Cohen's κ of pass/fail, Pearson and Spearman of the
scores, and per-evaluator deltas; with no shared event, an empty comparison and the reason.
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
    "Compact",
    "compact",
    "compare",
    "kappa",
    "pack_chunk",
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


def unpack_chunks(
    data: bytes, *, since: float | None = None, until: float | None = None
) -> dict[str, Compact]:
    """Every record of a string of chunks, an id's first record kept; with ``since``/``until``, only
    events whose time is in [since, until). A chunk that does not add up ends the reading."""
    chunks: list[dict[str, Compact]] = []
    pos, end = 0, len(data)
    while pos + _HEAD.size <= end:
        n, k, ids_len = _HEAD.unpack_from(data, pos)
        body = pos + _HEAD.size
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
