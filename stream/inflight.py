"""Batches in flight with ordered publication: the worker's at-least-once rule, free of Faust.

Several batches are evaluated at once (a 200 ms judge would otherwise bound a worker at one batch per
round trip), but their messages are sent in input order, one batch after the other, and a batch's
events are acked (their offsets may be committed) only once the broker has acknowledged every message
of that batch. So offsets never pass an unpublished result. Batches are acked in the order they were
submitted, too: Faust commits past a single unacked offset at the head of a partition when the
offsets after it are acked (its ``_new_offset`` treats ``min(acked) - committed == 1`` as contiguous),
so an out-of-order ack could let a commit pass an unpublished event.

A batch may send some of its messages early, through the ``emit`` function :meth:`InFlight.submit`
hands its work (the results of events that call no judge, :meth:`Processor.process_batch`): they go
to the producer at once, ahead of earlier batches' messages, while the batch's ack still waits for
every earlier batch's ack and for the delivery of all its own messages, early or not. Only sends
move; acks, and so offsets, stay in submission order.

A failure (the evaluation raised, the producer refused a message, early or not) stops everything: the failed
batch and every later one stay unacked, ``on_failure`` is called at once (the worker exits, see
``streameval.agents.liveness``) and :meth:`InFlight.check` raises :class:`PublishFailed`.
:meth:`InFlight.pending` lists the batches taken but not yet acked, with the time each was taken,
for the stall watchdog.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from . import telemetry
from .errors import StreamEvalError
from .outputs import Publish, Send
from .pipeline import Source
from .processor import Emit

__all__ = ["InFlight", "PublishFailed", "StallWatchdog", "batch_positions"]

log = logging.getLogger(__name__)
E = TypeVar("E")


class PublishFailed(StreamEvalError, RuntimeError):
    """The broker did not take a batch's messages: its events were not acked (redelivered on restart)."""


class InFlight(Generic[E]):
    """Evaluate batches concurrently; publish in order (early messages at once); ack each batch after delivery.

    ``submit`` blocks while ``limit`` batches are waiting to be published, and while a new batch
    would bring the events submitted and not yet acked over ``max_events`` (back-pressure on the
    consumer, whatever the batches' sizes; a batch whose rule results went out early still counts
    until it is acked). A batch larger than ``max_events`` waits until nothing else is unacked.
    ``ack(events)`` is called once per batch after all its messages were delivered; it is never
    called for a batch whose delivery failed: :meth:`check` then raises :class:`PublishFailed`.
    """

    def __init__(
        self,
        send: Send,
        ack: Callable[[Sequence[E]], Awaitable[None]],
        *,
        limit: int | None = None,
        max_events: int | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit is None and max_events is None:
            raise ValueError("give limit and/or max_events")
        if (limit is not None and limit < 1) or (max_events is not None and max_events < 1):
            raise ValueError("limit and max_events must be >= 1")
        self._max_events = max_events
        self._unacked = 0  # events submitted and not yet acked
        self._room = asyncio.Event()
        self._send = send
        self._ack = ack
        self._on_failure = on_failure
        self._clock = clock
        self._queue: asyncio.Queue[tuple[int, Sequence[E], asyncio.Future[list[Publish]]]] = asyncio.Queue(
            limit or 0
        )
        self._acking: set[asyncio.Future[None]] = set()
        self._last_ack: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        self._publisher: asyncio.Future[None] | None = None
        self._ids = itertools.count()
        self._pending: dict[
            int, tuple[float, object, Sequence[E]]
        ] = {}  # batch id -> (taken at, label, events)
        self._early: dict[
            int, list[asyncio.Future[Any]]
        ] = {}  # batch id -> deliveries of messages sent early
        self._after: dict[int, Callable[[], None]] = {}  # batch id -> what to do once it is acked

    def pending(self) -> list[tuple[float, object]]:
        """(monotonic time taken, label) of every batch submitted and not yet acked, oldest first."""
        return [(taken_at, label) for taken_at, label, _ in self._pending.values()]

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
            self._room.set()  # a submit waiting for room raises instead
            if self._on_failure is not None:
                self._on_failure(exc)

    def check(self) -> None:
        """Raise the first publication failure, if any (the caller stops consuming)."""
        if self._failure is not None:
            raise PublishFailed(f"publishing results failed: {self._failure!r}") from self._failure
        if self._publisher is not None and self._publisher.done() and not self._publisher.cancelled():
            self._publisher.result()

    async def submit(
        self,
        events: Sequence[E],
        work: Awaitable[list[Publish]] | Callable[[Emit], Awaitable[list[Publish]]],
        *,
        label: object = None,
        taken_at: float | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        """Start ``work`` (the batch's evaluation) now; its messages go out after earlier batches'.

        ``work`` is an awaitable of the batch's messages, or a function given an ``emit`` that sends
        some of them at once (awaited: they are handed to the producer) and returning that awaitable
        of the others. ``label`` (e.g. the batch's partitions and offsets) and ``taken_at`` (default:
        now) are what :meth:`pending` reports until the batch is acked. ``after`` is called once the broker
        acknowledged every message of the batch and it is acked (never for a batch that failed), e.g. to
        mark its results published (:meth:`streameval.processor.Processor.published`).
        """
        try:
            self.check()
        except BaseException:
            if asyncio.iscoroutine(work):
                work.close()  # never started: nothing to cancel, but do not leave it unawaited
            raise
        if self._publisher is None:
            self._publisher = asyncio.ensure_future(self._publish())
        try:
            await self._wait_for_room(len(events))
        except BaseException:
            if asyncio.iscoroutine(work):
                work.close()
            raise
        self._unacked += len(events)
        batch_id = next(self._ids)
        self._pending[batch_id] = (self._clock() if taken_at is None else taken_at, label, events)
        if after is not None:
            self._after[batch_id] = after
        if callable(work) and not asyncio.isfuture(work):
            self._early[batch_id] = []
            work = work(functools.partial(self._emit, batch_id))
        task = asyncio.ensure_future(work)
        put = asyncio.ensure_future(self._queue.put((batch_id, events, task)))
        await asyncio.wait([put, self._publisher], return_when=asyncio.FIRST_COMPLETED)
        if not put.done():  # the publisher died while the queue was full: nothing will take this batch
            put.cancel()
            task.cancel()
            self.check()

    async def _wait_for_room(self, n: int) -> None:
        assert self._publisher is not None
        while self._max_events is not None and self._unacked and self._unacked + n > self._max_events:
            self._room.clear()
            room: asyncio.Future[Any] = asyncio.ensure_future(self._room.wait())
            try:
                await asyncio.wait([room, self._publisher], return_when=asyncio.FIRST_COMPLETED)
            finally:
                room.cancel()
            self.check()  # a failure: nothing will be acked any more
            if self._publisher.done():  # closed
                raise PublishFailed("publishing has stopped")

    async def _emit(self, batch_id: int, messages: list[Publish]) -> None:
        """Send ``messages`` of batch ``batch_id`` now, ahead of its turn; its ack still waits for them."""
        self.check()
        deliveries = self._early.get(batch_id)
        if deliveries is None:  # closed meanwhile: nothing of this batch is acked
            raise asyncio.CancelledError
        try:
            for message in messages:
                delivery = asyncio.ensure_future(await self._send(message))
                delivery.add_done_callback(self._delivered)
                deliveries.append(delivery)
        except Exception as exc:
            self._fail(exc)
            raise

    def _delivered(self, delivery: asyncio.Future[Any]) -> None:
        if not delivery.cancelled() and delivery.exception() is not None:  # stop now, not at the batch's turn
            log.error(
                "the broker did not take a result sent early (%r); its batch stays unacked",
                delivery.exception(),
            )
            self._fail(delivery.exception())  # type: ignore[arg-type]

    async def drain(self) -> None:
        """Wait until every submitted batch is published and acked (or raise its failure)."""
        if self._publisher is None:
            return
        joined = asyncio.ensure_future(self._queue.join())
        await asyncio.wait([joined, self._publisher], return_when=asyncio.FIRST_COMPLETED)
        joined.cancel()
        self.check()
        if self._acking:
            await asyncio.wait(list(self._acking))
        self.check()

    async def close(self) -> list[E]:
        """Cancel everything not yet published or acked; returns those events, never acked (a new owner
        of their partitions re-reads them)."""
        if self._publisher is not None:
            if self._publisher.done() and not self._publisher.cancelled():
                self._publisher.exception()  # already reported through check() / on_failure
            self._publisher.cancel()
        while not self._queue.empty():
            self._queue.get_nowait()[2].cancel()
        for ack in list(self._acking):
            ack.cancel()
        dropped = [event for _, _, events in self._pending.values() for event in events]
        self._pending.clear()
        self._early.clear()
        self._after.clear()
        self._unacked = 0
        self._room.set()
        return dropped

    async def _publish(self) -> None:
        while True:
            batch_id, events, work = await self._queue.get()
            try:
                delivered: list[Awaitable[Any]] = [await self._send(message) for message in await work]
            except Exception as exc:
                self._fail(exc)
                raise
            finally:
                self._queue.task_done()
            delivered += self._early.pop(batch_id, ())
            ack = asyncio.ensure_future(self._ack_when_delivered(batch_id, events, delivered, self._last_ack))
            self._last_ack = ack
            self._acking.add(ack)
            ack.add_done_callback(self._acking.discard)

    async def _ack_when_delivered(
        self,
        batch_id: int,
        events: Sequence[E],
        delivered: list[Awaitable[Any]],
        previous: asyncio.Future[None] | None,
    ) -> None:
        try:
            await asyncio.gather(*delivered)
        except Exception as exc:  # not acked: redelivered after a restart; Redis makes that idempotent
            log.error("the broker did not take a batch's results (%r); its events stay unacked", exc)
            self._fail(exc)
            return
        if previous is not None:
            await asyncio.wait([previous])  # acks in submission order (see the module docstring)
        if self._failure is not None:
            return  # an earlier batch failed: nothing after it is acked either
        await self._ack(events)
        after = self._after.pop(batch_id, None)
        if after is not None:
            after()
        self._pending.pop(batch_id, None)
        self._unacked -= len(events)
        self._room.set()


Positions = dict[tuple[str, int], tuple[int, int]]
"""(topic, partition) -> (first offset, last offset) of a batch."""


def batch_positions(batch: Sequence[tuple[bytes, Source]]) -> Positions:
    """The partitions and offset ranges of a batch (the label the stall watchdog reports)."""
    out: Positions = {}
    for _, source in batch:
        if source.topic is None or source.partition is None or source.offset is None:
            continue
        key = (source.topic, source.partition)
        first, last = out.get(key, (source.offset, source.offset))
        out[key] = (min(first, source.offset), max(last, source.offset))
    return out


class StallWatchdog:
    """Ages of the oldest taken-but-unpublished batch per partition; a stall past ``bound_s`` is reported.

    :meth:`check` (every second) sets ``streameval_oldest_unpublished_batch_age_seconds`` per partition,
    and while any batch is older than ``bound_s`` logs one error naming the partitions and offsets and
    marks the worker stalled (``/ready`` answers 503 then); it logs again when the stall ends.
    """

    def __init__(self, bound_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound_s = bound_s
        self.clock = clock
        self._reported: frozenset[tuple[str, int]] = frozenset()
        self._partitions: set[tuple[str, int]] = set()

    def check(self, pending: Sequence[tuple[float, object]]) -> str | None:
        """Update the metrics from ``pending`` (:meth:`InFlight.pending`); returns the stall, if any."""
        now = self.clock()
        oldest: dict[tuple[str, int], tuple[float, int, int]] = {}  # partition -> (age, first, last offset)
        for taken_at, label in pending:
            if not isinstance(label, dict):
                continue
            for key, (first, last) in label.items():
                age = now - taken_at
                if key not in oldest or age > oldest[key][0]:
                    oldest[key] = (age, first, last)
        for key in self._partitions - oldest.keys():
            telemetry.OLDEST_BATCH_AGE.labels(key[0], str(key[1])).set(0)
        for key, (age, _, _) in oldest.items():
            telemetry.OLDEST_BATCH_AGE.labels(key[0], str(key[1])).set(age)
        self._partitions |= oldest.keys()
        stalled = {key: value for key, value in oldest.items() if value[0] > self.bound_s}
        if not stalled:
            if self._reported:
                log.warning("stall over: every batch taken is published again")
            self._reported = frozenset()
            telemetry.set_stall(None)
            return None
        what = "; ".join(
            f"{topic}[{partition}] offsets {first}-{last} taken {age:.0f} s ago"
            for (topic, partition), (age, first, last) in sorted(stalled.items())
        )
        stall = f"batches taken but not published for more than {self.bound_s:g} s: {what}"
        if frozenset(stalled) != self._reported:
            log.error("stall: %s", stall)
            self._reported = frozenset(stalled)
        telemetry.set_stall(stall)
        return stall
