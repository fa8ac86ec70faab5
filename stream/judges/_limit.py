"""Adaptive concurrency per judge: AIMD between 1 and ``max_concurrency``, honouring Retry-After.

A judge behind a shared gateway has a capacity nobody tells us. A fixed ``max_concurrency`` either
wastes it or keeps hammering a judge that answers 429: every retry then costs a slot and a wait. The
limit here behaves like TCP's congestion window:

- an attempt that got an answer (any status but the ones below) adds ``1 / limit`` (one per round
  trip at full use), up to ``max_concurrency``;
- a 429, a 5xx or a timeout halves the limit (never below 1), once per round trip: attempts that
  started before the last decrease do not decrease it again;
- a 429's Retry-After (capped at ``max_retry_after_s``) pauses every new attempt of the judge until it
  has passed, not only the retry of the request that got it.

Waiting for a slot or for the pause to end is never part of an attempt's ``timeout_s``. The current
limit is exported as ``streameval_judge_concurrency_limit{judge}``.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

from prometheus_client import Gauge

__all__ = ["CONCURRENCY_LIMIT", "AdaptiveLimit"]

CONCURRENCY_LIMIT = Gauge(
    "streameval_judge_concurrency_limit",
    "a judge's adaptive concurrency limit (AIMD on 429, 5xx and timeouts)",
    ["judge"],
)


class AdaptiveLimit:
    """A semaphore whose size moves between 1 and ``maximum``. Use ``async with limit.slot() as s``
    and call ``s.congested()`` / ``s.pause(seconds)`` from inside when the attempt says so."""

    DECREASE = 0.5

    def __init__(
        self, name: str, maximum: int, *, adaptive: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self.maximum = maximum
        self.adaptive = adaptive
        self.limit = float(maximum)
        self.in_flight = 0
        self._clock = clock
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._paused_until = 0.0
        self._wake: asyncio.TimerHandle | None = None
        self._last_decrease = -1.0
        self._gauge = CONCURRENCY_LIMIT.labels(name)
        self._gauge.set(maximum)

    @property
    def queued(self) -> int:
        """Attempts waiting for a slot."""
        return len(self._waiters)

    def _free(self) -> bool:
        return self.in_flight < max(1, int(self.limit)) and self._clock() >= self._paused_until

    async def acquire(self) -> float:
        """Wait for a slot; returns the attempt's start time (for :meth:`congested`)."""
        if not self._waiters and self._free():
            self.in_flight += 1
            return self._clock()
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._wake_waiters()  # blocked by a pause only: make sure a timer ends it
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # woken, then cancelled: pass the slot on
                self.in_flight -= 1
                self._wake_waiters()
            else:
                self._waiters.remove(future)
            raise
        return self._clock()

    def release(self) -> None:
        self.in_flight -= 1
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        now = self._clock()
        if now < self._paused_until:
            if self._wake is None:
                self._wake = asyncio.get_running_loop().call_later(self._paused_until - now, self._resume)
            return
        while self._waiters and self._free():
            future = self._waiters.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def _resume(self) -> None:
        self._wake = None
        self._wake_waiters()

    def succeeded(self) -> None:
        if self.adaptive and self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self._gauge.set(self.limit)
            self._wake_waiters()

    def congested(self, started: float) -> None:
        """A 429, 5xx or timeout of an attempt that started at ``started``: halve, once per round trip."""
        if not self.adaptive or started < self._last_decrease:
            return
        self._last_decrease = self._clock()
        self.limit = max(1.0, self.limit * self.DECREASE)
        self._gauge.set(self.limit)

    def pause(self, seconds: float) -> None:
        """No new attempt starts for ``seconds`` (a 429's Retry-After)."""
        until = self._clock() + seconds
        if until > self._paused_until:
            self._paused_until = until
            if self._wake is not None:
                self._wake.cancel()
                self._wake = None
            if self._waiters:  # re-arm the timer for the new end: nothing else may wake them
                self._wake_waiters()
