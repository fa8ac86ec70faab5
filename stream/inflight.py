"""Batches in flight with ordered publication: the worker's at-least-once rule, free of Faust.

Several batches are evaluated at once (a 200 ms judge would otherwise bound a worker at one batch per
round trip), but their messages are sent in input order, one batch after the other, and a batch's
events are acked (their offsets may be committed) only once the broker has acknowledged every message
of that batch. So offsets never pass an unpublished result. Acks of different batches may complete out
of order: the consumer commits only the contiguous acked prefix of a partition (Faust does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from .processor import Publish

__all__ = ["InFlight", "PublishFailed"]

log = logging.getLogger(__name__)
E = TypeVar("E")

Send = Callable[[Publish], Awaitable[Awaitable[Any]]]
"""Hand one message to the producer; returns (after queueing it) an awaitable of its delivery."""


class PublishFailed(RuntimeError):
    """The broker did not take a batch's messages: its events were not acked (redelivered on restart)."""


class InFlight(Generic[E]):
    """Evaluate up to ``limit`` batches at once; publish in order; ack each batch after delivery.

    ``submit`` blocks while ``limit`` batches are waiting to be published (back-pressure on the
    consumer). ``ack(events)`` is called once per batch after all its messages were delivered; it is
    never called for a batch whose delivery failed: :meth:`check` then raises :class:`PublishFailed`.
    """

    def __init__(self, send: Send, ack: Callable[[Sequence[E]], Awaitable[None]], *, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._send = send
        self._ack = ack
        self._queue: asyncio.Queue[tuple[Sequence[E], asyncio.Future[list[Publish]]]] = asyncio.Queue(limit)
        self._acking: set[asyncio.Future[None]] = set()
        self._failure: BaseException | None = None
        self._publisher: asyncio.Future[None] | None = None

    def check(self) -> None:
        """Raise the first publication failure, if any (the caller stops consuming)."""
        if self._failure is not None:
            raise PublishFailed(f"publishing results failed: {self._failure!r}") from self._failure
        if self._publisher is not None and self._publisher.done() and not self._publisher.cancelled():
            self._publisher.result()

    async def submit(self, events: Sequence[E], work: Awaitable[list[Publish]]) -> None:
        """Start ``work`` (the batch's evaluation) now; its messages go out after earlier batches'."""
        try:
            self.check()
        except BaseException:
            if asyncio.iscoroutine(work):
                work.close()  # never started: nothing to cancel, but do not leave it unawaited
            raise
        if self._publisher is None:
            self._publisher = asyncio.ensure_future(self._publish())
        task = asyncio.ensure_future(work)
        put = asyncio.ensure_future(self._queue.put((events, task)))
        await asyncio.wait([put, self._publisher], return_when=asyncio.FIRST_COMPLETED)
        if not put.done():  # the publisher died while the queue was full: nothing will take this batch
            put.cancel()
            task.cancel()
            self.check()

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

    async def close(self) -> None:
        """Cancel everything not yet published or acked (those events are redelivered: not acked)."""
        if self._publisher is not None:
            self._publisher.cancel()
        while not self._queue.empty():
            self._queue.get_nowait()[1].cancel()
        for ack in list(self._acking):
            ack.cancel()

    async def _publish(self) -> None:
        while True:
            events, work = await self._queue.get()
            try:
                delivered = [await self._send(message) for message in await work]
            except Exception as exc:
                self._failure = exc
                raise
            finally:
                self._queue.task_done()
            ack = asyncio.ensure_future(self._ack_when_delivered(events, delivered))
            self._acking.add(ack)
            ack.add_done_callback(self._acking.discard)

    async def _ack_when_delivered(self, events: Sequence[E], delivered: list[Awaitable[Any]]) -> None:
        try:
            await asyncio.gather(*delivered)
        except Exception as exc:  # not acked: redelivered after a restart; Redis makes that idempotent
            log.error("the broker did not take a batch's results (%r); its events stay unacked", exc)
            if self._failure is None:
                self._failure = exc
            return
        await self._ack(events)
