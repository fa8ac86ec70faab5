"""One channel's delivery: its own tasks, rate limit, retries, and the last answer.

Each channel has a :class:`ChannelWorker`: its deliveries run as tasks of their own, a few at once and in
order per incident (a resolve never overtakes its trigger), so a slow or failing channel delays only itself.
An attempt that fails with a network error, a timeout, 408, 429 or 5xx is retried after an exponential
backoff with jitter (at least a 429's or 503's ``Retry-After``), until ``max_attempts`` attempts or
``max_retry_s`` seconds; any other answer is final. What could not be delivered comes back as an
:class:`Outcome` with the last answer, for the caller's dead letter. Before sending, the worker asks
:class:`~._marks.Marks` whether this channel already took this notification (a redelivery, a restart)
and, for a resolve, whether it ever got the trigger.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from ... import telemetry
from ...models import Alert
from ...redis_client import retry_forever
from ._config import ChannelConfig
from ._marks import Marks
from ._payloads import HttpRequest, Links, build_request, incident_key

__all__ = ["ChannelWorker", "Outcome", "send_once"]

log = logging.getLogger(__name__)

BASE_DELAY_S = 1.0  # the first retry's delay (before jitter); doubles each attempt
MAX_DELAY_S = 120.0
_ANSWER_CHARS = 300  # of a provider's answer kept for a dead letter or the test command


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one notification on one channel."""

    channel: str
    delivered: bool  # accepted (2xx), or nothing to send (already taken; a resolve without trigger)
    answer: str  # the last answer: "HTTP 202: {...}", "timeout after 10 s", "skipped: ..."
    attempts: int = 0
    elapsed_s: float = 0.0
    status: int | None = None


def _retry_after(headers: httpx.Headers, now: float) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - now)


def _retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _answer(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return f"HTTP {status}: {text[:_ANSWER_CHARS]}" if text else f"HTTP {status}"


async def send_once(
    client: httpx.AsyncClient, request: HttpRequest, timeout_s: float
) -> tuple[int | None, str, httpx.Headers]:
    """One attempt: (status or None, the answer as text, headers). Never raises for the network."""
    try:
        response = await client.post(
            request.url, content=request.body, headers=list(request.headers), timeout=timeout_s
        )
    except httpx.TimeoutException:
        return None, f"timeout after {timeout_s:g} s", httpx.Headers()
    except httpx.HTTPError as exc:  # connection refused, reset, protocol errors: no URL in the text
        return None, f"{type(exc).__name__}", httpx.Headers()
    return response.status_code, _answer(response.status_code, response.content), response.headers


class ChannelWorker:
    """A channel's deliveries: up to ``concurrency`` at once, in order per incident (a resolve never
    overtakes its trigger); :meth:`submit` returns the delivery's task."""

    def __init__(
        self,
        channel: ChannelConfig,
        client: httpx.AsyncClient,
        links: Links,
        marks: Marks | None = None,
        *,
        concurrency: int = 8,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        base_delay_s: float = BASE_DELAY_S,
    ) -> None:
        self.channel = channel
        self.client = client
        self.links = links
        self.marks = marks
        self.clock, self.monotonic, self.sleep, self.jitter = clock, monotonic, sleep, jitter
        self.base_delay_s = base_delay_s
        self._slots = asyncio.Semaphore(concurrency)
        self._incidents: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> (lock, deliveries holding it)
        self._interval = 60.0 / channel.rate_per_min if channel.rate_per_min else 0.0
        self._next_start = 0.0
        self._tasks: set[asyncio.Task[Outcome]] = set()

    def submit(self, alert: Alert) -> asyncio.Task[Outcome]:
        key = incident_key(alert)
        lock, users = self._incidents.get(key) or (asyncio.Lock(), 0)
        self._incidents[key] = (lock, users + 1)
        task = asyncio.create_task(self._one(alert, key, lock), name=f"notify:{self.channel.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _one(self, alert: Alert, key: str, lock: asyncio.Lock) -> Outcome:
        try:
            async with lock, self._slots:  # the lock first: tasks take it in the order they were submitted
                # Redis down: wait it out (the message stays uncommitted); a delivery whose mark could not
                # be written is sent again, with the same dedup key
                return await retry_forever(
                    lambda: self.handle(alert), what=f"notify {self.channel.name}: its marks in Redis"
                )
        finally:
            held, users = self._incidents[key]
            if users <= 1:
                del self._incidents[key]
            else:
                self._incidents[key] = (held, users - 1)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def handle(self, alert: Alert) -> Outcome:
        """Deliver ``alert`` unless this channel took it already; record what it took."""
        name = self.channel.name
        if self.marks is not None:
            skip = await self.marks.skip(name, alert)
            if skip is not None:
                return Outcome(name, True, f"skipped: {skip}")
        outcome = await self.deliver(alert)
        if outcome.delivered and self.marks is not None:
            await self.marks.taken(name, alert)
        return outcome

    async def _paced(self) -> None:
        if not self._interval:
            return
        now = self.monotonic()
        delay = self._next_start - now
        self._next_start = max(now, self._next_start) + self._interval
        if delay > 0:
            await self.sleep(delay)

    async def deliver(self, alert: Alert) -> Outcome:
        """Send with retries within the channel's budget (no marks)."""
        channel, name = self.channel, self.channel.name
        first = self.monotonic()
        answer, status, attempt = "not attempted", None, 0
        while attempt < channel.max_attempts:
            left = channel.max_retry_s - (self.monotonic() - first)
            if left <= 0:
                break
            if attempt:
                telemetry.NOTIFY_RETRIED.labels(name).inc()
            await self._paced()
            attempt += 1
            request = build_request(channel, alert, self.links, clock=self.clock)
            began = self.monotonic()
            status, answer, headers = await send_once(self.client, request, min(channel.timeout_s, left))
            telemetry.NOTIFY_LATENCY.labels(name).observe(self.monotonic() - began)
            if status is not None and 200 <= status < 300:
                telemetry.NOTIFY_SENT.labels(name).inc()
                return Outcome(name, True, answer, attempt, self.monotonic() - first, status)
            telemetry.NOTIFY_FAILED.labels(name).inc()
            if status is not None and not _retryable(status):
                break
            delay = min(MAX_DELAY_S, self.base_delay_s * 2 ** (attempt - 1)) * (0.5 + 0.5 * self.jitter())
            wait = _retry_after(headers, self.clock()) if status in (429, 503) else None
            if wait is not None:
                delay = max(delay, wait)
            if attempt >= channel.max_attempts or self.monotonic() - first + delay > channel.max_retry_s:
                break
            log.info(
                "notify %s: attempt %d failed (%s); retrying in %.1f s", name, attempt, answer[:80], delay
            )
            await self.sleep(delay)
        telemetry.NOTIFY_DEAD_LETTERED.labels(name).inc()
        return Outcome(name, False, answer, attempt, self.monotonic() - first, status)
