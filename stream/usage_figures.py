"""A window's usage figures of the monitored calls (docs/usage.md): pure functions over the figures the
usage feature (streameval.features.usage) adds to each event's increments, under names starting ``use:``,
so that the pair's window hash and each of its slices (streameval.features.segments) sum them exactly like
their own figures. A window without such names has no ``usage`` (nothing configured: nothing changes).

Names: ``use:n`` events with a usage block; ``use:in``, ``use:out``, ``use:cin``, ``use:rt`` token sums
(input, output, cached input, reasoning); ``use:c`` the cost sum and ``use:p:{currency}`` how many events
had a cost in that currency; ``use:d{bucket}`` / ``use:t{bucket}`` durations and times to first token in
log buckets; ``use:f:{reason}`` finish reasons.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .models import AggregateUsage

__all__ = ["PREFIX", "bucket", "bucket_value", "usage_of"]

#: the names of the usage figures start with this (a slice keeps names with this prefix too)
PREFIX = "use:"

#: durations are counted in buckets 10^(1/20) wide (20 a decade) from 1 ms: a percentile read at a bucket's
#: geometric middle is within ±5.9 % of the exact one (the bucket's half width, 10^(1/40) - 1); bucket 0
#: holds everything under 1 ms and is read as 0.5 ms
_PER_DECADE = 20


def bucket(ms: float) -> int:
    """The duration bucket of ``ms`` (see above)."""
    if ms < 1.0:
        return 0
    return 1 + int(math.log10(ms) * _PER_DECADE)


def bucket_value(index: int) -> float:
    """The value a percentile falling in bucket ``index`` is read as: its geometric middle (0.5 ms for 0)."""
    if index <= 0:
        return 0.5
    return float(10 ** ((index - 0.5) / _PER_DECADE))


def _percentile(buckets: Mapping[int, float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of bucket counts, read at the bucket's middle."""
    total = sum(buckets.values())
    if total <= 0:
        return None
    rank = max(1.0, math.ceil(q * total - 1e-9))
    seen = 0.0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            return bucket_value(index)
    return bucket_value(max(buckets))


def usage_of(fields: Mapping[str, float], count: int) -> AggregateUsage | None:
    """The window's usage from its figures (``count``: its events); None when it has no usage figure."""
    durations: dict[int, float] = {}
    firsts: dict[int, float] = {}
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
        else:
            sums[rest] = value
    if not found:
        return None
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
        duration_p50_ms=_percentile(durations, 0.5),
        duration_p95_ms=_percentile(durations, 0.95),
        duration_p99_ms=_percentile(durations, 0.99),
        ttft_p50_ms=_percentile(firsts, 0.5),
        ttft_p95_ms=_percentile(firsts, 0.95),
        finish_reasons=dict(sorted(reasons.items())),
    )
