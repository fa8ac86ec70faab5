"""Redis state: idempotent recording of graded results and windowed aggregates, one script per pair.

A batch is recorded with one script call per model × suite pair (one hash slot each, streameval.keyspace)
plus one for the indexes and one for the dead letters. The worker sums each pair's increments per
target hash, and the script reads and writes each hash once (HMGET, HSET) per pair and batch, so a
batch costs Redis a fixed number of commands per pair, not per event (streameval._lua.record_script: its core and the features' blocks).

Idempotency: an event is identified by a digest of its id and its content (the raw message bytes),
scoped by its model × suite pair. Its mark (6 bytes in a bucket of a hash) is kept for the replay horizon
``seen_ttl_s``, its encoded result only for the redelivery horizon ``redelivery_ttl_s``: the results of
a pair's events in one batch are one string (``rb``), written in the same pipeline before the record
call (never through the script: Redis hashes every byte that enters Lua), and the script keeps, per
counted event, result id -> :func:`pointer` (``rid``):

* same id, same content, within the redelivery horizon: the stored result is published again,
  nothing is counted (unless another event reused the id since: its fresh evaluation then);
* same id, same content, after it but within the replay horizon: the fresh evaluation is published,
  nothing is counted;
* same id, different content (or another model or suite): a different event, evaluated and counted
  on its own; it never receives another event's result.

The record script is all or nothing per pair: when any event of the call is already marked it writes
nothing and names them; the store drops those and calls again with the rest. So each event is counted
exactly once with its mark, also when a batch is partly redelivered after a crash, and a script call
that is retried after a lost reply cannot count twice.

Aggregate hash fields: ``count sum sumsq passes grade:{g} lat:{bucket} late late_redirected`` and
``ev:{name}:count|sum|sumsq|passes|errors`` per evaluator, plus ``ev:{name}:c:{counter}`` for the
counters an evaluator reports. Counts are stored as integers, sums with 17 significant digits.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from . import _lua, store_calls, telemetry
from .errors import StoreUnavailable
from .feature import BatchRecorder, Call, Recorded
from .keyspace import OVERFLOW_MODEL, Client, Keys, guard, is_cluster, retry_forever, run_scripts
from .models import GradedResult
from .redelivery import stored_results
from .store_codec import PACKED_FIELD, as_text, hash_fields, pack_increments, parse_pointer, pointer
from .store_entries import Entries, RecordEntry
from .store_published import PUBLISHED, RIDE_S, Notes, Pending, Receipt, is_published, published_field

__all__ = [
    "MARK_BUCKET_BYTES",
    "PACKED_FIELD",
    "PUBLISHED",
    "PairAggregate",
    "Receipt",
    "ResultStore",
    "hash_fields",
    "pointer",
    "retry_forever",
    "stored_results",
]

log = logging.getLogger(__name__)

#: one record_many call waiting to be recorded with others: items, dead letters, receipt, its replies
_Request = tuple[
    Sequence[RecordEntry],
    Sequence[tuple[str, str, float]],
    "Receipt | None",
    "asyncio.Future[list[bytes | None]]",
]

#: idempotency marks: one hash per pair and replay generation; field: the first MARK_BUCKET_BYTES bytes
#: of an event's 8-byte digest (65,536 buckets), value: the other 6 bytes of each mark in the bucket,
#: concatenated. A field costs ~50 bytes in a large hash, a mark 6 more: ~55 bytes a mark while most
#: buckets hold one (under ~30 k events per pair and week), ~12 at 10 a bucket (~650 k), ~7 at 100
#: (~6.5 M; bench/redis_cost.py --marks). A call reads the buckets of its events with two HMGET and
#: writes them with one HSET, so a bucket's value is copied: 6 bytes x marks per pair and week / 65,536
#: (600 B at 6.5 M, 6 kB at 65 M marks per pair and week).
MARK_BUCKET_BYTES = 2
#: how often (s) a worker renews the TTL of a pair's all-time hash (the TTL is ALL_TIME_TTL_S: days)
_RENEW_S = 3600.0


@dataclass(frozen=True)
class PairAggregate:
    """Figures of one model × suite in one window (or all time)."""

    model: str
    suite: str
    count: int
    mean: float
    pass_rate: float
    fields: dict[str, float]
    version: str = ""  # the suite version ("": figures of the layout before versions)


class ResultStore:
    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "streameval:",
        windows: Sequence[int] = (60,),
        window_ttl_s: int = 7 * 86400,
        seen_ttl_s: int = 7 * 86400,
        redelivery_ttl_s: int = 3600,
        all_time_ttl_s: int = 90 * 86400,
        max_pairs: int = 10_000,
        allowed_lateness_s: float = 5.0,
        clock: Callable[[], float] | None = None,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        recorders: Sequence[BatchRecorder] = (),
        linger_s: float = 0.0,
    ) -> None:
        """``recorders``: the features recording with each batch (streameval.feature), built by the composition
        root only when configured; their blocks are composed into this store's record script, once."""
        self.client = client
        self.keys = Keys(prefix)
        self.prefix = prefix
        self.windows = tuple(windows)
        self.window_ttl_s = window_ttl_s
        self.seen_ttl_s = seen_ttl_s
        self.redelivery_ttl_s = redelivery_ttl_s
        self.all_time_ttl_s = all_time_ttl_s
        self.max_pairs = max_pairs
        self.allowed_lateness_s = allowed_lateness_s
        self.clock = clock  # tests inject one; None: the Redis server's clock (the watermark's clock)
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        # False (backfills): windows are indexed for the API but not handed to the window closer, which would
        # close (and redirect) the old windows a backfill is still filling
        self.publish_windows = True
        self._offset = 0.0  # Redis clock minus ours, learnt when the record script says we guessed wrong
        self.recorders = tuple(recorders)
        # one script per combination of recorders; a block that is off is neither sent nor parsed
        self._blocks = [r for r in self.recorders if r.lua]
        self._record = client.register_script(_lua.record_script([(r.name, r.lua) for r in self._blocks]))
        self._index = client.register_script(_lua.INDEX)
        self._cap = client.register_script(_lua.PAIR_CAP)
        self._dead = client.register_script(_lua.DEAD_LETTERS)
        self._published = client.register_script(_lua.PUBLISHED)
        self._pending = (
            Pending()
        )  # published marks waiting for their pair's next call (streameval.store_published)
        self._admitted: dict[str, bool] = {}  # pair -> within max_pairs (this worker's cache)
        self._entries = Entries(
            self.keys
        )  # results -> what the record calls count (streameval.store_entries)
        # marks hashes this worker has seen given their TTL: a hash never loses it within its generation
        # (the script writes marks only when it counts), so the EXPIRE is sent once
        self._expiring: set[str] = set()
        self._expiring_since = time.monotonic()
        # id(call args) -> (those args, what to tell each block once the call succeeded); holding the args keeps
        # their id from being reused by another call while the entry lives
        self._committing: dict[int, tuple[list[Any], list[tuple[BatchRecorder, Any]]]] = {}
        self._renewed: dict[str, float] = {}  # pair -> when this worker last renewed its all-time TTL
        # record_many's group commit: the calls waiting for the one being recorded
        self.coalesce = True
        self.linger_s = linger_s  # how long a call waits for others to join (STREAMEVAL_RECORD_LINGER_MS)
        self._last_flush = -1e9  # monotonic time the last group went out
        self._queue: list[_Request] = []
        self._flusher: asyncio.Future[None] | None = None

    # -- keys (for callers that address one pair) -----------------------------------------------
    def pair_id(self, model: str, suite: str, version: str = "") -> str:
        return self.keys.pair_id(model, suite, version)

    def window_key(self, size: int, start: int, model: str, suite: str, version: str = "") -> str:
        return self.keys.window(self.pair_id(model, suite, version), size, start)

    def all_time_key(self, model: str, suite: str, version: str = "") -> str:
        return self.keys.all_time(self.pair_id(model, suite, version))

    def now(self) -> float:
        """Our best guess at the Redis clock (or the injected clock)."""
        return self.clock() if self.clock is not None else time.time() + self._offset

    def _prepare(self, index: int, item: RecordEntry, *, retract: bool = False) -> Recorded:
        return self._entries.prepare(index, item, retract=retract)

    # -- writes -------------------------------------------------------------------------------
    async def record_many(
        self,
        items: Sequence[RecordEntry],
        dead_letters: Sequence[tuple[str, str, float]] = (),
        *,
        retractions: Sequence[RecordEntry] = (),
        receipt: Receipt | None = None,
    ) -> list[bytes | None]:
        """Record a batch: one script call per pair, one for the indexes, one for the dead letters.

        ``retractions`` take back an earlier result's contribution (a session's revision replaces the
        previous one, streameval.features.sessions): each is counted once like an item, with every figure negated
        and no drill-down example; give each its own id (e.g. the earlier id + ``~``). Their replies are
        not returned.

        ``items`` are (result, encoded result, counters[, content]); ``content`` (the raw message) tells
        a redelivery from another event reusing its id (without it: id, model, suite, event time).
        ``dead_letters`` are (kind, ``topic:partition:offset``, event time), each counted once per source
        position. Returns per item ``None`` when it was new (counted; publish it), else the bytes to
        publish instead: the first evaluation's result within the redelivery horizon, or this one; or
        :data:`PUBLISHED` (empty: publish nothing) when the broker already has its result
        (streameval.store_published).

        ``receipt``: filled with what the call kept for redeliveries; give it to :meth:`published` once the
        broker acknowledged the results (their copies then go).

        Calls made while another is being recorded (batches in flight, a batch's two phases) are recorded
        together, in one script call per pair (group commit: fewer, fuller calls; each call's replies and
        receipt are its own). ``coalesce = False`` records each call on its own.
        """
        if not items and not dead_letters:
            return []
        if retractions or not self.coalesce:
            return (await self._record_requests([(items, dead_letters, receipt)], retractions))[0]
        loop = asyncio.get_running_loop()
        request: _Request = (items, dead_letters, receipt, loop.create_future())
        if self._flusher is not None and self._flusher.get_loop() is not loop:  # a store used by another loop
            self._flusher, self._queue = None, []
        self._queue.append(request)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await request[3]

    async def _flush(self) -> None:
        """Record the calls waiting, together, until none waits (record_many's group commit)."""
        group: list[_Request] = []
        try:
            while self._queue:
                # busy (the last call went out within the linger): wait for the batches evaluated meanwhile;
                # else (a trickle) only for those ready in this turn of the loop: no latency added
                busy = time.monotonic() - self._last_flush < self.linger_s
                await asyncio.sleep(self.linger_s if busy else 0)
                group, self._queue = self._queue, []
                self._last_flush = time.monotonic()
                try:
                    replies = await self._record_requests([(i, d, r) for i, d, r, _ in group])
                except Exception as exc:
                    for *_, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (*_, future), reply in zip(group, replies, strict=True):
                    if not future.done():
                        future.set_result(reply)
        except BaseException as exc:  # cancelled: nothing waits for ever
            for *_, future in [*group, *self._queue]:
                if not future.done():
                    future.set_exception(StoreUnavailable(f"recording stopped: {exc!r}"))
            self._queue = []
            raise

    async def _record_requests(
        self,
        requests: Sequence[tuple[Sequence[RecordEntry], Sequence[tuple[str, str, float]], Receipt | None]],
        retractions: Sequence[RecordEntry] = (),
    ) -> list[list[bytes | None]]:
        """Record ``requests`` (items, dead letters, receipt) in one round: each one's replies."""
        starts = list(itertools.accumulate((len(r[0]) for r in requests), initial=0))
        items: Sequence[RecordEntry] = [item for r in requests for item in r[0]]
        dead_letters = [letter for r in requests for letter in r[1]]

        def part_of(index: int) -> int:  # the request of an event (retractions: the only one)
            return min(bisect.bisect_right(starts, index) - 1, len(requests) - 1)

        results = len(items)
        events = [self._prepare(i, item) for i, item in enumerate(items)]
        events += [self._prepare(results + i, item, retract=True) for i, item in enumerate(retractions)]
        items = [*items, *retractions]
        await self._admit(events)
        out: list[bytes | None] = [None] * len(items)
        # the same event twice in one batch (a redelivered copy next to the first): the copies publish
        # whatever the first one does
        first: dict[tuple[str, bytes], int] = {}
        copies = {e.index: first.setdefault((e.pair, e.digest), e.index) for e in events}
        pending = [e for e in events if copies[e.index] == e.index]
        strings: dict[tuple[int, str], str] = {}  # (request, pair) -> its results' string
        writes = self._result_strings(pending, self.now(), strings, part_of)
        keep: list[Call] = []
        for recorder in self.recorders:  # the features' own commands (e.g. the label join's verdicts)
            calls, commands = recorder.writes(self, pending, self.now())
            keep += calls
            writes += commands
        dups: list[
            tuple[Recorded, bytes]
        ] = []  # events already counted, with the pointer to what they published
        dead_call = self._dead_letter_call(dead_letters) if dead_letters else None
        # published marks ride along in their pair's call; a pair's that waited RIDE_S go on their own
        notes = self._pending.take()
        carried = dict(notes)  # a redelivery found marked before its notes were written is published too
        pointers: dict[str, str] = {}  # pair -> the pointers hash its counted events went to
        try:
            for _ in range(len(items) + 8):  # each round drops a duplicate or corrects the clock guess
                now = self.now()
                groups: dict[str, list[Recorded]] = defaultdict(list)
                for event in pending:
                    groups[event.pair].append(event)
                calls = [
                    self._record_call(pair, group, now, notes.get(pair)) for pair, group in groups.items()
                ]
                alone = self._published_calls(notes, groups, now, RIDE_S)
                index = [self._index_call(groups, now)] if groups else []
                if is_cluster(self.client) and index:  # the closer must see a pair in a window's index first
                    await guard(run_scripts(self.client, index))
                    index = []
                extra = ([dead_call] if dead_call is not None else []) + keep + [call for _, call in alone]
                replies = await guard(run_scripts(self.client, [*index, *extra, *calls], writes=writes))
                dead_call, writes, keep = None, [], []
                for pair, _ in alone:
                    notes.pop(pair)
                pending = []
                for (pair, group), call, reply in zip(
                    groups.items(), calls, replies[len(index) + len(extra) :], strict=True
                ):
                    pending += self._settle(call, group, reply, out, dups)
                    if as_text(reply[0]) == "ok":
                        notes.pop(pair, None)
                        pointers[pair] = call[1][1]
                if not pending:
                    break
        finally:
            self._pending.give_back(notes)
        if pending:
            raise StoreUnavailable("recording a batch did not settle (the Redis clock keeps moving away?)")
        if dups:
            await self._republish(dups, out, carried)
        if self.wait_replicas:
            await store_calls.wait_replicated(
                self.client,
                self.wait_replicas,
                self.wait_timeout_ms,
                [*(self.keys.pair(p) for p in {e.pair: 0 for e in events}), self.keys.ix, self.keys.dl],
            )
        for r, (_, _, receipt) in enumerate(requests):
            if receipt is not None:
                own = {pair: key for (p, pair), key in strings.items() if p == r}
                self._receipt(receipt, [e for e in events if part_of(e.index) == r], pointers, own)
        replies = [
            out[copies[i]] if copies[i] == i or out[copies[i]] is not None else items[copies[i]][1]
            for i in range(results)
        ]
        return [replies[starts[r] : starts[r + 1]] for r in range(len(requests))]

    def _result_strings(
        self,
        events: Sequence[Recorded],
        now: float,
        strings: dict[tuple[int, str], str],
        part_of: Callable[[int], int],
    ) -> list[tuple[Any, ...]]:
        """The SET commands that keep the batch's encoded results: one string per pair (its events' results
        concatenated, for the redelivery horizon); gives each event its pointer into it.

        They go in the same pipeline as the record calls, before them (one connection, one node: the string
        exists before any pointer to it does). A string whose events turn out already counted is never
        pointed to and expires with the horizon. One string per request recorded together (``part_of``
        an event's index) and pair, so that each goes once the broker has its own request's results;
        ``strings`` gets their keys.
        """
        if not self.redelivery_ttl_s:
            return []
        rgen = int(now // self.redelivery_ttl_s)
        ttl = store_calls.until((rgen + 2) * self.redelivery_ttl_s, now)
        by_pair: dict[tuple[int, str], list[Recorded]] = defaultdict(list)
        for event in events:
            by_pair[(part_of(event.index), event.pair)].append(event)
        writes: list[tuple[Any, ...]] = []
        for (part, pair), group in by_pair.items():
            suffix = f"{rgen}:{secrets.token_hex(6)}"
            offset = 0
            for event in group:
                event.pointer = pointer(event.digest, offset, len(event.encoded), suffix)
                offset += len(event.encoded)
            strings[(part, pair)] = self.keys.result_blob(pair, suffix)
            writes.append(("SET", strings[(part, pair)], b"".join(e.encoded for e in group), "EX", ttl))
        return writes

    def _receipt(
        self, receipt: Receipt, events: Sequence[Recorded], pointers: dict[str, str], strings: dict[str, str]
    ) -> None:
        """What a recorded batch kept: each event with a result (counted now, or before: a redelivery) under
        the pointers hash its pointer went to (this generation's for the others), and the strings."""
        receipt.notes.clear()
        if not self.redelivery_ttl_s:
            return
        rgen = int(self.now() // self.redelivery_ttl_s)
        seen: set[tuple[str, bytes]] = set()
        for event in events:
            if event.result is None or (event.pair, event.digest) in seen:
                continue
            seen.add((event.pair, event.digest))
            key = pointers.get(event.pair) or self.keys.result_ids(event.pair, rgen)
            receipt.add(event.pair, key, event.result.id, event.digest)
        for pair, key in strings.items():
            receipt.string(pair, key)

    def published(self, receipts: Sequence[Receipt]) -> None:
        """The broker acknowledged the results of these record calls: their copies may go. Nothing is sent
        now: each pair's next record call carries the marks, or :meth:`flush_published` (streameval.store_published)."""
        self._pending.add(receipts)

    async def flush_published(self, older_than_s: float = RIDE_S) -> int:
        """Write the published marks that waited ``older_than_s`` for a record call of their pair, in one
        pipeline (the worker's timer calls this). Returns how many pairs'."""
        notes = self._pending.take(older_than_s)
        try:
            calls = self._published_calls(notes, {}, self.now(), 0.0)
            if calls:
                await guard(run_scripts(self.client, [call for _, call in calls]))
                for pair, _ in calls:
                    notes.pop(pair)
            return len(calls)
        finally:
            self._pending.give_back(notes)

    def _published_calls(
        self, notes: dict[str, Notes], skip: Mapping[str, Any], now: float, older_than_s: float
    ) -> list[tuple[str, Call]]:
        """One PUBLISHED call per pair with notes older than ``older_than_s`` and not in ``skip``."""
        if not notes or not self.redelivery_ttl_s:
            return []
        cut = time.monotonic() - older_than_s
        rgen = int(now // self.redelivery_ttl_s)
        out: list[tuple[str, Call]] = []
        for pair, held in notes.items():
            if pair in skip or held.since > cut:
                continue
            keys, args = held.args(self._current_pointers(pair, rgen))
            out.append((pair, (self._published, keys, args)))
        return out

    def _current_pointers(self, pair: str, rgen: int) -> tuple[str, str]:
        return self.keys.result_ids(pair, rgen), self.keys.result_ids(pair, rgen - 1)

    async def _republish(
        self, dups: list[tuple[Recorded, bytes]], out: list[bytes | None], carried: dict[str, Notes]
    ) -> None:
        """For events counted before: nothing when the broker has their result (a published mark, written or
        carried by this call), else the result their first counted copy published, while it is kept."""
        gen = int(self.now() // self.redelivery_ttl_s) if self.redelivery_ttl_s else None
        dups = await self._not_published(dups, out, carried, gen)
        if not dups:
            return
        generations = () if gen is None else (gen, gen - 1)
        found = await guard(
            stored_results(
                self.client, self.keys, [(e.pair, e.digest, value, generations) for e, value in dups]
            )
        )
        for (event, _), encoded in zip(dups, found, strict=True):
            if encoded is not None:
                out[event.index] = encoded

    async def _not_published(
        self,
        dups: list[tuple[Recorded, bytes]],
        out: list[bytes | None],
        carried: dict[str, Notes],
        gen: int | None,
    ) -> list[tuple[Recorded, bytes]]:
        """The events counted before whose result the broker may not have: not among the published marks this
        call carried, and (those without a stored copy) without a published mark in Redis. The others get
        :data:`PUBLISHED`."""
        rest: list[tuple[Recorded, bytes]] = []
        for event, value in dups:
            notes = carried.get(event.pair)
            if notes is not None and event.result is not None and notes.holds(event.result.id, event.digest):
                out[event.index] = PUBLISHED
            else:
                rest.append((event, value))
        unknown = [
            event
            for event, value in rest
            if event.result is not None and parse_pointer(value, event.digest) is None
        ]
        if gen is None or not unknown:
            return rest

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for event in unknown:
                    assert event.result is not None
                    for g in (gen, gen - 1):
                        pipe.hget(self.keys.result_ids(event.pair, g), published_field(event.result.id))
                return list(await pipe.execute())

        found = await guard(read())
        marked = {
            event.index
            for i, event in enumerate(unknown)
            if is_published(found[2 * i], event.digest) or is_published(found[2 * i + 1], event.digest)
        }
        for index in marked:
            out[index] = PUBLISHED
        return [(event, value) for event, value in rest if event.index not in marked]

    def _settle(
        self,
        call: tuple[Any, list[str], list[Any]],
        group: list[Recorded],
        reply: list[Any],
        out: list[bytes | None],
        dups: list[tuple[Recorded, bytes]],
    ) -> list[Recorded]:
        """Apply one record reply; returns the events still to record. An event counted before publishes
        this evaluation unless :meth:`_republish` finds the first one (``dups``)."""
        status = as_text(reply[0])
        entry = self._committing.pop(id(call[2]), None)
        if status == "ok" and entry is not None and entry[0] is call[2]:
            for recorder, token in entry[1]:
                recorder.committed(token)
        if status == "ok":
            if len(self._expiring) > 100_000 or time.monotonic() - self._expiring_since > 600:
                # forget now and then: a set recreated after a Redis restart without its data gets a TTL again
                self._expiring.clear()
                self._expiring_since = time.monotonic()
            self._expiring.update(
                (call[1][1], call[1][3])
            )  # these pointers and marks hashes have their TTL now
            return []
        if status == "skew":
            self._offset = float(as_text(reply[1])) - time.time()
            return group
        dup = {int(reply[i]) - 1: reply[i + 1] for i in range(1, len(reply), 2)}
        for j, event in enumerate(group):
            if j in dup:
                out[event.index] = event.encoded  # after the redelivery horizon: this one
                dups.append((event, bytes(dup[j]) if not isinstance(dup[j], str) else dup[j].encode()))
        return [event for j, event in enumerate(group) if j not in dup]

    async def record(
        self, result: GradedResult, encoded: bytes, counters: dict[str, dict[str, float]] | None = None
    ) -> bytes | None:
        return (await self.record_many([(result, encoded, counters)]))[0]

    async def record_dead_letter(self, kind: str, source_key: str, event_time: float) -> bool:
        """Count a dead letter once per source position (``topic:partition:offset``); False if seen."""
        call = self._dead_letter_call([(kind, source_key, event_time)])
        return bool((await guard(run_scripts(self.client, [call])))[0])

    async def _admit(self, events: list[Recorded]) -> None:
        """Pairs beyond ``max_pairs`` aggregate under the overflow model (their results are unchanged)."""
        unknown = sorted(
            {e.pair for e in events if e.pair not in self._admitted and not _is_overflow(e.pair)}
        )
        if unknown:
            now = self.now()
            args = [self.max_pairs, repr(now), repr(now - self.all_time_ttl_s), self.all_time_ttl_s, *unknown]
            flags = await guard(run_scripts(self.client, [(self._cap, [self.keys.pairs], args)]))
            if len(self._admitted) > 10 * self.max_pairs:  # forget, do not grow without bound
                self._admitted.clear()
            self._admitted.update(zip(unknown, (bool(f) for f in flags[0]), strict=True))
        for event in events:
            if not self._admitted.get(event.pair, True):
                _, suite, version = self.keys.split_pair(event.pair)
                event.pair = self.pair_id(OVERFLOW_MODEL, suite, version)
                telemetry.AGGREGATE_OVERFLOW.labels(suite).inc()

    def candidates(self, size: int, now: float) -> tuple[int, int]:
        """The starts of the two windows of ``size`` that may be open now on the Redis clock (the worker's guess)."""
        if self.clock is not None:
            start = int(now // size) * size
            return start, start
        margin = min(
            store_calls.CLOCK_MARGIN_S, size / 2
        )  # any clock within the margin is in one of the two windows
        return int((now - margin) // size) * size, int((now + margin) // size) * size

    def _record_call(
        self, pair: str, group: list[Recorded], now: float, notes: Notes | None = None
    ) -> tuple[Any, list[str], list[Any]]:
        keys = self.keys
        targets: dict[tuple[int, int], tuple[int, dict[str, float]]] = {}
        total: dict[str, float] = defaultdict(float)
        for event in group:
            for s, size in enumerate(self.windows):
                start = int(event.event_time // size) * size
                n, inc = targets.setdefault((s, start), (0, defaultdict(float)))
                targets[(s, start)] = (n + 1, inc)
                for name, value in event.increments.items():
                    inc[name] += value
            for name, value in event.increments.items():
                total[name] += value
        generation = int(now // self.seen_ttl_s)
        rgen = int(now // self.redelivery_ttl_s) if self.redelivery_ttl_s else 0
        per_event: list[Any] = []
        for event in group:
            per_event += [event.digest, event.result.id if event.result is not None else "", event.pointer]
        marks = keys.marks(pair, generation)
        klist: list[str] = [
            keys.all_time(pair),
            keys.result_ids(pair, rgen),
            keys.result_ids(pair, rgen - 1),
            marks,
            keys.marks(pair, generation - 1),
        ]
        args: list[Any] = [
            len(self.windows),
            len(targets),
            len(group),
            "" if self.clock is None else repr(now),
            repr(float(self.allowed_lateness_s)),
            self.window_ttl_s,
            self._all_time_ttl(pair),
            0 if marks in self._expiring else store_calls.until((generation + 2) * self.seen_ttl_s + 60, now),
            self._pointers_ttl(pair, rgen, now),
            MARK_BUCKET_BYTES,
            pack_increments(total),
        ]
        for size in self.windows:
            first, second = self.candidates(size, now)
            klist += [keys.window(pair, size, first), keys.window(pair, size, second)]
            args += [size, first, second]
        for (s, start), (n, inc) in targets.items():
            size = self.windows[s]
            klist += [keys.window(pair, size, start), keys.closed(pair, size, start)]
            args += [
                s + 1,
                start,
                n,
                b"" if n == len(group) else pack_increments(inc),
            ]  # b"": the same as the total
        args += per_event
        if notes is None:  # the published marks that ride along (streameval.store_published)
            args += [0, 0]
        else:
            published_keys, published_args = notes.args(klist[1:3])
            klist += published_keys
            args += published_args
        committing: list[tuple[BatchRecorder, Any]] = []
        for recorder in self._blocks:  # each block: nk, na, its ARGV; its KEYS (streameval.feature)
            block = recorder.block(self, pair, group, list(targets), now)
            if block is None:
                args += [0, 0]
                continue
            klist += block.keys
            args += [len(block.keys), len(block.args), *block.args]
            if block.token is not None:
                committing.append((recorder, block.token))
        if committing:
            if len(self._committing) > 1_000:  # calls whose reply never came (errors): do not grow
                self._committing.clear()
            self._committing[id(args)] = (args, committing)
        return self._record, klist, args

    def _pointers_ttl(self, pair: str, rgen: int, now: float) -> int:
        """The result pointers hash's TTL: 0 when no results are kept; negative when this worker already
        gave it one (the script then writes only the pointers)."""
        if not self.redelivery_ttl_s:
            return 0
        ttl = store_calls.until((rgen + 2) * self.redelivery_ttl_s, now)
        return -ttl if self.keys.result_ids(pair, rgen) in self._expiring else ttl

    def _all_time_ttl(self, pair: str) -> int:
        """The all-time hash's TTL, renewed by writes: negative (only a new hash gets it) within an hour
        of this worker's last renewal, whose call may not have run; a lost renewal is made up an hour later."""
        now = time.monotonic()
        if now - self._renewed.get(pair, -_RENEW_S) < _RENEW_S:
            return -self.all_time_ttl_s
        if len(self._renewed) > 10 * self.max_pairs:
            self._renewed.clear()
        self._renewed[pair] = now
        return self.all_time_ttl_s

    def _index_call(self, groups: dict[str, list[Recorded]], now: float) -> Call:
        """Pairs into each window's index before their data: the closer reads the index, then the data."""
        unpublished = None if self.publish_windows else f"{self.keys.ix}bf-open:"
        return store_calls.index_call(
            self._index,
            self.keys,
            self.windows,
            {pair: [e.event_time for e in group] for pair, group in groups.items()},
            now,
            allowed_lateness_s=self.allowed_lateness_s,
            window_ttl_s=self.window_ttl_s,
            all_time_ttl_s=self.all_time_ttl_s,
            candidates=self.candidates,
            unpublished=unpublished,
        )

    def _dead_letter_call(self, dead_letters: Sequence[tuple[str, str, float]]) -> Call:
        return store_calls.dead_letter_call(
            self._dead,
            self.keys,
            self.windows,
            dead_letters,
            self.now(),
            seen_ttl_s=self.seen_ttl_s,
            window_ttl_s=self.window_ttl_s,
            all_time_ttl_s=self.all_time_ttl_s,
        )

    # -- reads --------------------------------------------------------------------------------
    async def pairs(self) -> list[tuple[str, str, str]]:
        """Every model × suite × version seen (at most ``max_pairs`` plus the overflow pairs); version ""
        is the layout before versions."""
        members = cast(list[bytes], await guard(self.client.zrange(self.keys.pairs, 0, -1)))
        return sorted(self.keys.split_pair(as_text(m)) for m in members)

    async def all_time_fields(
        self, pairs: Sequence[tuple[str, str] | tuple[str, str, str]]
    ) -> list[dict[str, float]]:
        """The all-time hash of each pair (model, suite[, version]), in order (one read per pair; on a
        cluster, per node)."""

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for pair in pairs:
                    pipe.hgetall(self.all_time_key(*pair))
                return list(await pipe.execute())

        return [hash_fields(raw) for raw in await guard(read())] if pairs else []

    async def all_time(self) -> list[PairAggregate]:
        pairs = await self.pairs()
        hashes = await self.all_time_fields(pairs)
        return [
            _aggregate(model, suite, raw, version)
            for (model, suite, version), raw in zip(pairs, hashes, strict=True)
        ]

    async def window(self, size: int, start: int, model: str, suite: str, version: str = "") -> PairAggregate:
        raw = await guard(self.client.hgetall(self.window_key(size, start, model, suite, version)))
        return _aggregate(model, suite, hash_fields(raw), version)

    async def dead_letter_counts(self) -> dict[str, int]:
        raw = await guard(self.client.hgetall(self.keys.dead_letters_all))
        return {as_text(k): int(v) for k, v in raw.items()}


def _is_overflow(pair: str) -> bool:
    return Keys.split_pair(pair)[0] == OVERFLOW_MODEL


def _aggregate(model: str, suite: str, fields: dict[str, float], version: str = "") -> PairAggregate:
    count = int(fields.get("count", 0))
    mean = fields.get("sum", 0.0) / count if count else 0.0
    pass_rate = fields.get("passes", 0.0) / count if count else 0.0
    return PairAggregate(model, suite, count, mean, pass_rate, fields, version)
