"""Drill-down: a bounded sample of the worst and the failing results of every window, and results by id.

For every model × suite × window the record script (its drill-down block, streameval.features.drilldown) keeps two sorted
sets in the pair's slot (streameval.keyspace):

* ``worst``: the ``examples`` lowest scores (zset score: the result's score);
* ``failing``: a uniform sample of ``examples`` failed results: those with the lowest :func:`sample_rank`
  (a hash of the event's id and content, so a replay picks the same ones).

Why a sample of the failures and not the latest ones: every newer failure would displace an older one,
so Redis would write every failed result of every window (measured with bench/redis_cost.py: about
0.3 set members per event per window size at a 29 % failure rate). A hash sample enters like the
lowest scores do, about ``examples × (1 + ln(failures / examples))`` writes per window, and represents
the whole window rather than its last seconds. The API lists it latest first.

Each member is a compact result (:func:`compact`): score, grade, gates, each evaluator's score and
reason, and each judge's score and reasoning (texts cut at :data:`MAX_TEXT` characters), about
0.5-2 KB. So a window keeps at most ``2 × examples`` of them, for ``example_ttl_s`` (at most the window's
own retention).

Redis does little per event: the worker sends only *candidates*, results that can still enter a set.
Within a batch, only the ``examples`` lowest ranks (score, or sample rank) of each window can; across
batches, :class:`Candidates` remembers what this worker already sent to each window: once it sent
``examples`` ranks, the set's cut-off is at most the highest of them (other workers' results only
lower it), so a higher rank cannot enter and is not sent. The cache only ever skips what could not
enter, never what could, so the sets are exact with any number of workers (ties in any order).

The record script also keeps ``result id -> pointer`` (``P{T}:rid:{gen}``) to the encoded results of the
redelivery horizon (streameval.store), so that ``GET /api/v1/results/{id}`` finds a full result while it
is retained.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...keyspace import Keys
from ...models import GradedResult

__all__ = ["KINDS", "MAX_TEXT", "Candidates", "Example", "compact", "example_ids", "parse", "sample_rank"]

#: the two samples of a window
KINDS = ("worst", "failing")
#: characters kept of each reason and judge reasoning in an example
MAX_TEXT = 400
#: windows whose cut-offs a worker remembers; beyond, it forgets them all (and sends a few more candidates)
_MAX_REMEMBERED = 20_000


def sample_rank(digest: bytes) -> float:
    """A failed result's rank in the ``failing`` sample: its digest's first 6 bytes as a number in [0, 1)."""
    return int.from_bytes(digest[:6], "big") / float(1 << 48)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - 1] + "…"


def compact(result: GradedResult) -> bytes:
    """The example form of a result: what an operator reads to see why it scored low."""
    doc: dict[str, Any] = {
        "id": result.id,
        "score": result.score,
        "passed": result.passed,
        "grade": result.grade,
        "threshold": result.threshold,
        "category": result.category,
        "event_time": result.event_time,
        "latency_ms": result.latency_ms,
        "evaluators": [
            {
                "name": e.name,
                "score": e.score,
                "passed": e.passed,
                "weight": e.weight,
                "reason": _cut(e.reason),
                "error": _cut(e.error),
            }
            for e in result.evaluators
        ],
    }
    if result.suite_version:  # docs/versions.md; absent on results without a version
        doc["suite_version"] = result.suite_version
    for mark in ("shadow", "backfill"):
        if getattr(result, mark):
            doc[mark] = True
    if result.failed_gates:
        doc["failed_gates"] = result.failed_gates
    if result.reason:
        doc["reason"] = _cut(result.reason)
    if result.judge is not None:
        j = result.judge
        doc["judge"] = {
            "status": j.status,
            "panel_score": j.panel_score,
            "final_score": j.final_score,
            "reason": _cut(j.reason),
            "judges": [
                {
                    "name": v.name,
                    "model": v.model,
                    "status": v.status,
                    "score": v.score,
                    "reasoning": _cut(v.reasoning),
                    "error": _cut(v.error or v.reason),
                }
                for v in j.judges
            ],
        }
    return orjson.dumps(doc)


@dataclass(frozen=True)
class Example:
    """One kept example: its zset score (the result's score, or its event time) and its compact result."""

    rank_score: float
    doc: dict[str, Any]


def parse(raw: bytes | str, rank_score: float) -> Example | None:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return Example(rank_score, doc) if isinstance(doc, dict) else None


def example_ids(members: Sequence[bytes | str], n: int = 3) -> list[str]:
    """The ids of the first ``n`` compact results (for an alert's ``examples``)."""
    out: list[str] = []
    for raw in members:
        example = parse(raw, 0.0)
        if example is not None and isinstance(example.doc.get("id"), str):
            out.append(example.doc["id"])
        if len(out) == n:
            break
    return out


def _rank(g: tuple[float, GradedResult]) -> float:
    return g[0]


@dataclass
class _Sent:
    """What this worker sent to one window's sets: the ``keep`` lowest ranks of each (max-heaps, negated)."""

    worst: list[float] = field(default_factory=list)
    failing: list[float] = field(default_factory=list)

    def heap(self, kind: str) -> list[float]:
        return self.worst if kind == "worst" else self.failing


class Candidates:
    """Chooses, per record call, the results that can still enter a window's examples (module docstring)."""

    def __init__(self, keys: Keys, keep: int) -> None:
        self.keys = keys
        self.keep = keep
        # a result as its example may show it (the suite file's redact:, docs/redact.md); None: as it is
        self.redact: Callable[[GradedResult], GradedResult] | None = None
        self._sent: dict[tuple[str, int, int], _Sent] = {}

    def part(
        self,
        pair: str,
        windows: Sequence[int],
        events: Sequence[tuple[GradedResult, float, bytes]],
        *,
        example_ttl_s: int,
    ) -> tuple[list[str], list[Any], list[tuple[tuple[str, int, int], str, float]]]:
        """The KEYS and ARGV (examples kept, ttl, then per KEY its candidates) of the record script's drill-down block
        for one pair's events ``(result, event time, digest)``.

        Also returns what to remember once the call succeeded (:meth:`commit`).
        """
        klist: list[str] = []
        args: list[Any] = [self.keep, example_ttl_s]
        sent: list[tuple[tuple[str, int, int], str, float]] = []
        bodies: dict[int, bytes] = {}  # a result can be a candidate of several windows and both kinds
        if self.keep:
            for size in windows:
                by_start: dict[
                    int, tuple[list[tuple[float, GradedResult]], list[tuple[float, GradedResult]]]
                ] = {}
                for result, event_time, digest in events:
                    low, failed = by_start.setdefault(int(event_time // size) * size, ([], []))
                    low.append((result.score, result))
                    if not result.passed:
                        failed.append((sample_rank(digest), result))
                for start, (low, failed) in by_start.items():
                    window = (pair, size, start)
                    memory = self._sent.get(window)
                    for kind, ranked in (("worst", low), ("failing", failed)):
                        heap = memory.heap(kind) if memory is not None else []
                        if len(heap) >= self.keep:  # only what can still enter (module docstring)
                            cut = -heap[0]
                            ranked = [g for g in ranked if g[0] < cut]
                        if len(ranked) > self.keep:
                            ranked = heapq.nsmallest(self.keep, ranked, key=_rank)
                        if not ranked:
                            continue
                        klist.append(self.keys.examples(pair, kind, size, start))
                        args.append(len(ranked))
                        for rank, result in ranked:
                            body = bodies.get(id(result))
                            if body is None:
                                shown = result if self.redact is None else self.redact(result)
                                body = bodies[id(result)] = compact(shown)
                            args += [repr(rank), body]
                            sent.append((window, kind, rank))
        return klist, args, sent

    def commit(self, sent: Sequence[tuple[tuple[str, int, int], str, float]]) -> None:
        """Remember what a successful call sent (a call that changed nothing must not narrow the cut-offs)."""
        if len(self._sent) > _MAX_REMEMBERED:
            self._sent.clear()
        for window, kind, rank in sent:
            heap, value = self._sent.setdefault(window, _Sent()).heap(kind), -rank
            if len(heap) < self.keep:
                heapq.heappush(heap, value)
            elif value > heap[0]:
                heapq.heapreplace(heap, value)
