"""Version comparison (docs/versions.md): each versioned result's compact scores, appended per pair and
batch for ``/api/v1/stats/compare`` and ``streameval backfill`` to read (streameval.features.compare packs them).

Kept only when something will compare: a shadow suite file, a backfill run, or an explicit
``STREAMEVAL_COMPARE_TTL_S`` (e.g. on the live worker, for a later backfill to compare against)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded, slice_values
from ...keyspace import Client, Keys, guard
from ...store_codec import as_text
from ._scores import Compact, pack_chunk, pack_slices, unpack_chunks

__all__ = ["DEFAULT_TTL_S", "CompactScoresRecorder", "compact_scores"]

#: how long compact scores are kept when something compares (STREAMEVAL_COMPARE_TTL_S unset)
DEFAULT_TTL_S = 3 * 86400


class CompactScoresRecorder:
    """APPENDs of a batch's compact per-event scores, one per versioned pair, with the TTL and the evaluator
    names the first time this worker writes each key (kept between ``ttl_s`` and twice that). An event whose
    record call finds it counted before was appended before too: readers keep an id's first record.
    With ``dimensions`` (the suite file's ``segments:``), each chunk is followed by its events' slice values,
    so that two versions compare per slice."""

    name = "compact scores"
    lua = ""

    def __init__(self, ttl_s: int, *, max_keys: int = 100_000, dimensions: tuple[str, ...] = ()) -> None:
        self.ttl_s = ttl_s
        self.max_keys = max_keys
        self.dimensions = dimensions
        self._known: dict[str, tuple[str, ...]] = {}  # key -> names sent (scn) / TTL given (sc), this worker

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        gen = int(now // self.ttl_s)
        by_pair: dict[str, list[Recorded]] = defaultdict(list)
        for event in events:
            if event.result is not None and event.result.suite_version:
                by_pair[event.pair].append(event)
        writes: list[tuple[Any, ...]] = []
        if len(self._known) > self.max_keys:
            self._known.clear()
        for pair, group in by_pair.items():
            key = ctx.keys.compact_scores(pair, gen)
            data = pack_chunk(
                [
                    (r.id, e.event_time, r.score, r.passed, [(x.score, x.passed) for x in r.evaluators])
                    for e in group
                    if (r := e.result) is not None
                ]
            )
            if self.dimensions:
                values = [slice_values(e) for e in group]
                if any(values):  # a session's results have none
                    data += pack_slices(self.dimensions, values)
            writes.append(("APPEND", key, data))
            if key not in self._known:
                writes.append(("EXPIRE", key, max(1, math.ceil((gen + 2) * self.ttl_s - now))))
                self._known[key] = ()
            # the longest list of the batch (an unsampled event's result lacks the judge panel's, at the end)
            names = max(
                (tuple(x.name for x in e.result.evaluators) for e in group if e.result is not None), key=len
            )
            names_key = ctx.keys.compact_names(pair)
            known = self._known.get(names_key)
            if known is None or (names != known and known[: len(names)] != names):  # never shrink to a prefix
                writes.append(("SET", names_key, "\0".join(names), "EX", 2 * self.ttl_s))
                self._known[names_key] = names
        return [], writes

    def block(
        self,
        ctx: RecordContext,
        pair: str,
        group: Sequence[Recorded],
        targets: Sequence[tuple[int, int]],
        now: float,
    ) -> Block | None:
        return None

    def committed(self, token: Any) -> None:
        pass


async def compact_scores(
    client: Client,
    keys: Keys,
    pair: str,
    *,
    ttl_s: int,
    now: float,
    since: float | None = None,
    until: float | None = None,
    slices: dict[str, dict[str, str]] | None = None,
) -> tuple[dict[str, Compact], list[str]]:
    """A pair's retained compact scores (both live generations; an id's first record) and its evaluator
    names (streameval.features.compare); events whose time is outside [since, until) are left out. With
    ``slices``, fills it with each event's slice values where they were kept."""
    if not ttl_s:
        return {}, []
    gen = int(now // ttl_s)
    async with client.pipeline(transaction=False) as pipe:
        for g in (gen - 1, gen, gen + 1):  # +1: this clock may be behind the workers'
            pipe.get(keys.compact_scores(pair, g))
        pipe.get(keys.compact_names(pair))
        *parts, names = await guard(pipe.execute())
    data = b"".join(bytes(p) for p in parts if p)
    return unpack_chunks(data, since=since, until=until, slices=slices), [
        n for n in as_text(names or b"").split("\0") if n
    ]
