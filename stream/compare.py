"""Comparing two suite versions on the events both scored (docs/versions.md): pure functions, no I/O.

Per-event compact scores: the record path appends one record per counted result to a string per pair
and generation (``P{T}:sc:{gen}``, streameval.keyspace; :func:`pack_scores` / :func:`unpack_scores`):

    id length (1 byte) · id (UTF-8, at most 255 bytes) · event time (uint32, s) · score (float32) ·
    flags (1 byte: bit 0 passed) · k (1 byte) · k evaluator scores (uint16 each: bit 15 passed,
    bits 0-14 the score × 32767)

A redelivered event may be appended again (the append goes with the record call, before Redis says
whether the event was new): readers keep the first record of an id, which is what was counted.
The evaluator names of a pair are kept once (``P{T}:scn``), in the order of the records' scores.

:func:`compare` takes two versions' records and reports n, the mean difference with a paired 95 % CI,
pass→fail and fail→pass flips with example ids, Cohen's κ of pass/fail, Pearson and Spearman of the
scores, and per-evaluator deltas; with no shared event, an empty comparison and the reason.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .stats import moments, t_quantile_975

__all__ = ["MAX_FLIP_EXAMPLES", "Compact", "compare", "kappa", "pack_scores", "rank", "unpack_scores"]

_HEAD = struct.Struct(">IfBB")  # event time, score, flags, evaluator count
_EV = 32767
#: most example ids listed per flip direction
MAX_FLIP_EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class Compact:
    """One event's scores in one version."""

    event_time: int
    score: float
    passed: bool
    evaluators: tuple[tuple[float, bool], ...]


def pack_scores(event_id: str, event_time: float, score: float, passed: bool,
                evaluators: Sequence[tuple[float, bool]]) -> bytes:  # fmt: skip
    """One compact record (module docstring); ids over 255 bytes are cut (they still join, by their head)."""
    raw = event_id.encode()[:255]
    k = min(len(evaluators), 255)
    ev = b"".join(struct.pack(">H", (0x8000 if ok else 0) | round(min(1.0, max(0.0, s)) * _EV))
                  for s, ok in evaluators[:k])  # fmt: skip
    head = _HEAD.pack(max(0, min(int(event_time), 0xFFFFFFFF)), score, 1 if passed else 0, k)
    return bytes([len(raw)]) + raw + head + ev


def unpack_scores(data: bytes, *, since: float | None = None, until: float | None = None) -> dict[str, Compact]:
    """The records of one string, first record per id kept; with ``since``/``until``, only events whose
    time is in [since, until). A truncated tail (a write cut short) is ignored."""
    out: dict[str, Compact] = {}
    pos, end, head = 0, len(data), _HEAD.size
    unpack_head, unpack_ev = _HEAD.unpack_from, struct.unpack_from
    while pos < end:
        n = data[pos]
        start = pos + 1 + n
        if start + head > end:
            break
        at, score, flags, k = unpack_head(data, start)
        stop = start + head + 2 * k
        if stop > end:
            break
        event_id = data[pos + 1 : start].decode(errors="replace")
        pos = stop
        if event_id in out or (since is not None and at < since) or (until is not None and at >= until):
            continue
        evs = unpack_ev(f">{k}H", data, start + head) if k else ()
        out[event_id] = Compact(at, score, bool(flags & 1), tuple(((v & 0x7FFF) / _EV, bool(v & 0x8000)) for v in evs))
    return out


def rank(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based; ties share their mean rank), as Spearman's ρ needs."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1
        for m in range(i, j + 1):
            ranks[order[m]] = mean_rank
        i = j + 1
    return ranks


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx, syy = math.fsum(d * d for d in dx), math.fsum(d * d for d in dy)
    if sxx <= 1e-24 or syy <= 1e-24:
        return None
    r = math.fsum(a * b for a, b in zip(dx, dy, strict=True)) / math.sqrt(sxx * syy)
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


def compare(a: Mapping[str, Compact], b: Mapping[str, Compact], *, names_a: Sequence[str] = (),
            names_b: Sequence[str] = (), labels: tuple[str, str] = ("a", "b")) -> dict[str, Any]:  # fmt: skip
    """Version ``b`` against version ``a`` on the ids both scored (module docstring). Differences are b - a."""
    shared = sorted(set(a) & set(b))
    n = len(shared)
    out: dict[str, Any] = {"a": labels[0], "b": labels[1], "n": n, "n_a": len(a), "n_b": len(b)}
    if n == 0:
        reason = ("version a has no retained scores" if not a else "version b has no retained scores" if not b
                  else "the two versions scored no event in common")  # fmt: skip
        return {**out, "empty": True, "reason": reason, "mean_a": None, "mean_b": None, "mean_diff": None,
                "ci_low": None, "ci_high": None, "pass_to_fail": 0, "fail_to_pass": 0,
                "pass_to_fail_ids": [], "fail_to_pass_ids": [], "kappa": None, "pearson": None,
                "spearman": None, "evaluators": {}}  # fmt: skip
    xs = [a[i].score for i in shared]
    ys = [b[i].score for i in shared]
    diffs = [y - x for x, y in zip(xs, ys, strict=True)]
    m = moments(n, math.fsum(diffs), math.fsum(d * d for d in diffs))
    half = t_quantile_975(n) * m.std / math.sqrt(n) if n >= 2 else None
    pa = [a[i].passed for i in shared]
    pb = [b[i].passed for i in shared]
    to_fail = [i for i, x, y in zip(shared, pa, pb, strict=True) if x and not y]
    to_pass = [i for i, x, y in zip(shared, pa, pb, strict=True) if y and not x]
    return {
        **out, "empty": False, "reason": None,
        "mean_a": math.fsum(xs) / n, "mean_b": math.fsum(ys) / n, "mean_diff": m.mean,
        "ci_low": None if half is None else m.mean - half, "ci_high": None if half is None else m.mean + half,
        "pass_rate_a": sum(pa) / n, "pass_rate_b": sum(pb) / n,
        "pass_to_fail": len(to_fail), "fail_to_pass": len(to_pass),
        "pass_to_fail_ids": to_fail[:MAX_FLIP_EXAMPLES], "fail_to_pass_ids": to_pass[:MAX_FLIP_EXAMPLES],
        "kappa": kappa(pa, pb), "pearson": _pearson(xs, ys), "spearman": _pearson(rank(xs), rank(ys)),
        "evaluators": _evaluator_deltas(a, b, shared, names_a, names_b),
    }  # fmt: skip


def _evaluator_deltas(a: Mapping[str, Compact], b: Mapping[str, Compact], shared: Iterable[str],
                      names_a: Sequence[str], names_b: Sequence[str]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per evaluator both versions have (by name): n, mean in each, mean difference, pass rates."""
    index_b = {name: j for j, name in enumerate(names_b)}
    sums: dict[str, list[float]] = {}
    for i, name in enumerate(names_a):
        j = index_b.get(name)
        if j is None:
            continue
        acc = sums.setdefault(name, [0, 0.0, 0.0, 0, 0])
        for event_id in shared:
            ea, eb = a[event_id].evaluators, b[event_id].evaluators
            if i < len(ea) and j < len(eb):
                acc[0] += 1
                acc[1] += ea[i][0]
                acc[2] += eb[j][0]
                acc[3] += ea[i][1]
                acc[4] += eb[j][1]
    out = {}
    for name, (n, sa, sb, passes_a, passes_b) in sums.items():
        if n:
            out[name] = {"n": int(n), "mean_a": sa / n, "mean_b": sb / n, "mean_diff": (sb - sa) / n,
                         "pass_rate_a": passes_a / n, "pass_rate_b": passes_b / n}  # fmt: skip
    only_a = [x for x in names_a if x not in index_b]
    only_b = [x for x in names_b if x not in set(names_a)]
    for name in only_a:
        out[name] = {"n": 0, "only_in": "a"}
    for name in only_b:
        out[name] = {"n": 0, "only_in": "b"}
    return out
