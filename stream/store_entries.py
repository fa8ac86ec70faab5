"""A graded result as the record calls count it: its idempotency digest, its pair, its figures' increments
(streameval.store). Caches what repeats across a worker's events (pair ids, event times, field names).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from .feature import Recorded
from .keyspace import Keys
from .models import GradedResult, parse_time
from .stats import latency_bucket

__all__ = ["MAX_COUNTER_LABELS", "Entries", "RecordEntry"]

#: agent domain (and similar) counter labels kept per pair and evaluator in one worker; beyond: "_other"
MAX_COUNTER_LABELS = 64

#: (result, encoded result, counters[, content[, annotation]]): ``annotation`` is what the pipeline derived
#: for the features (e.g. an embedding-drift sample); the store hands it to the recorders uninterpreted
RecordEntry = (
    tuple[GradedResult, bytes, dict[str, dict[str, float]] | None]
    | tuple[GradedResult, bytes, dict[str, dict[str, float]] | None, bytes]
    | tuple[GradedResult, bytes, dict[str, dict[str, float]] | None, bytes, Any]
)


#: per evaluator result name: its aggregate fields (``ev:{name}:`` and count, sum, sumsq, passes, errors),
#: built once instead of five string concatenations per evaluator per event
_EV_FIELDS: dict[str, tuple[str, str, str, str, str, str]] = {}


def _ev_fields(name: str) -> tuple[str, str, str, str, str, str]:
    base = f"ev:{name}:"
    fields = (base, base + "count", base + "sum", base + "sumsq", base + "passes", base + "errors")
    if len(_EV_FIELDS) < 10_000:  # names come from suite files (and registered evaluators): few
        _EV_FIELDS[name] = fields
    return fields


class Entries:
    """Makes the :class:`~streameval.feature.Recorded` of each result of a batch."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._labels: dict[tuple[str, str], set[str]] = {}  # (pair, evaluator) -> counter labels kept
        self._pair_of: dict[
            tuple[str, str, str], str
        ] = {}  # (model, suite, version) -> pair id, computed once
        self._event_times: dict[str, float] = {}  # RFC 3339 text -> epoch seconds, parsed once

    def prepare(self, index: int, item: RecordEntry, *, retract: bool = False) -> Recorded:
        result, encoded, counters = item[0], item[1], item[2]
        content = (
            item[3]
            if len(item) > 3
            else (f"{result.model}\0{result.suite}\0{result.event_time}\0{result.category}".encode())
        )
        digest = hashlib.blake2b(result.id.encode() + b"\0" + content, digest_size=8).digest()
        version = result.suite_version or ""  # figures per version (docs/versions.md)
        pair = self._pair_of.get((result.model, result.suite, version))
        if pair is None:
            if len(self._pair_of) > 10_000:  # forget, do not grow without bound
                self._pair_of.clear()
            pair = self._pair_of[(result.model, result.suite, version)] = self.keys.pair_id(
                result.model, result.suite, version
            )
        inc: dict[str, float] = defaultdict(float)
        inc["count"] += 1
        inc["sum"] += result.score
        inc["sumsq"] += result.score * result.score
        inc["passes"] += int(result.passed)
        inc[f"grade:{result.grade}"] += 1
        inc[f"lat:{latency_bucket(result.latency_ms)}"] += 1
        for gate in result.failed_gates:  # the dashboard's gate failures
            inc[f"gate:{gate}"] += 1
        for ev in result.evaluators:
            names = _EV_FIELDS.get(ev.name)
            if names is None:
                names = _ev_fields(ev.name)
            base, count, total, sumsq, passes, errors = names
            inc[count] += 1
            inc[total] += ev.score
            inc[sumsq] += ev.score * ev.score
            inc[passes] += int(ev.passed)
            inc[errors] += int(ev.error is not None)
            for counter, value in ((counters or {}).get(ev.name) or {}).items():
                inc[f"{base}c:{self._label(pair, ev.name, counter)}"] += value
        event_time = self._event_times.get(result.event_time)  # a batch's events mostly share one
        if event_time is None:
            if len(self._event_times) > 1024:
                self._event_times.clear()
            event_time = self._event_times[result.event_time] = parse_time(result.event_time)
        if retract:
            inc = defaultdict(float, {name: -value for name, value in inc.items()})
        annotation = item[4] if len(item) > 4 and not retract else None
        return Recorded(
            index, pair, digest, event_time, encoded, inc, result, retract=retract, annotation=annotation
        )

    def _label(self, pair: str, evaluator: str, counter: str) -> str:
        """``domain:{name}:{stat}`` counters (agent domains) beyond MAX_COUNTER_LABELS names fold into ``_other``."""
        if not counter.startswith("domain:"):
            return counter
        name, _, stat = counter[7:].rpartition(":")
        kept = self._labels.setdefault((pair, evaluator), set())
        if name in kept or len(kept) < MAX_COUNTER_LABELS:
            kept.add(name)
            return counter
        return f"domain:_other:{stat}"
