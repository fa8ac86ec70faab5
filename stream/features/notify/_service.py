"""The notifier: reads the alerts topic in a consumer group of its own and hands each alert to its channels.

Delivery never touches evaluation: the worker publishes alerts and goes on; this reads them with its own
group (``{app id}-notify``) and commits an alert's offset only once every matching channel accepted it
(2xx) or it became a dead letter on the dead-letter topic (kind ``undelivered``, naming the channel and
its last answer), in offset order per partition. A crash re-reads what was not committed; the channels'
marks in Redis (:mod:`._marks`) keep a re-read alert from being sent twice, and a repeat that slips
through (killed between the answer and the mark) carries the same dedup key / alias.

Runs inside ``streameval worker`` when the suite file has ``notify:`` (a task next to the Faust app) or
alone as ``streameval notify --config FILE``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from ..._version import __version__
from ...deadletters import fit
from ...envelope import DEFAULT_MAX_DEAD_LETTER_BYTES
from ...kafka_security import KafkaSecurity, bootstrap_hosts
from ...keyspace import Client, Keys
from ...models import Alert, DeadLetter, DeadLetterSource, format_time, parse_time
from ._config import ChannelConfig
from ._deliver import ChannelWorker, Outcome
from ._marks import DEDUPE_TTL_S, Marks
from ._payloads import Links

__all__ = ["MAX_AGE_S", "STOP_GRACE_S", "Notifier"]

log = logging.getLogger(__name__)

#: alerts read more than this long after they fired are not sent (a new group reads the topic from its start)
MAX_AGE_S = 24 * 3600
#: on a stop, how long deliveries under way may still finish (the rest are read again by the next notifier)
STOP_GRACE_S = 5.0
_FETCH_WAIT_MS = 50  # Tansu holds a caught-up fetch for the whole wait (streameval.kafka_io)


class _Offsets:
    """Offsets taken per partition, in order; what may be committed once the first ones are done."""

    def __init__(self) -> None:
        self.pending: dict[TopicPartition, dict[int, bool]] = {}

    def add(self, tp: TopicPartition, offset: int) -> None:
        self.pending.setdefault(tp, {})[offset] = False

    def done(self, tp: TopicPartition, offset: int) -> None:
        if offset in self.pending.get(tp, {}):
            self.pending[tp][offset] = True

    def committable(self) -> dict[TopicPartition, int]:
        out = {}
        for tp, offsets in self.pending.items():
            while offsets:
                first = next(iter(offsets))
                if not offsets[first]:
                    break
                del offsets[first]
                out[tp] = first + 1
        return out

    def __len__(self) -> int:
        return sum(len(o) for o in self.pending.values())


class Notifier:
    """Alert delivery for ``channels`` from ``alerts_topic`` (module docstring); :meth:`run` until ``stop``."""

    def __init__(
        self,
        channels: Sequence[ChannelConfig],
        *,
        bootstrap: str,
        alerts_topic: str,
        deadletter_topic: str,
        group_id: str,
        client: Client,
        prefix: str,
        public_url: str | None = None,
        security: KafkaSecurity | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_pending: int = 10_000,
        max_age_s: float = MAX_AGE_S,
        dedupe_ttl_s: int = DEDUPE_TTL_S,
        max_dead_letter_bytes: int = DEFAULT_MAX_DEAD_LETTER_BYTES,
        base_delay_s: float | None = None,
    ) -> None:
        self.channels = tuple(channels)
        self.bootstrap = bootstrap
        self.alerts_topic = alerts_topic
        self.deadletter_topic = deadletter_topic
        self.group_id = group_id
        self.marks = Marks(client, Keys(prefix), dedupe_ttl_s=dedupe_ttl_s)
        self.links = Links(public_url)
        self.security = security or KafkaSecurity()
        self.transport = transport
        self.max_pending = max_pending
        self.max_age_s = max_age_s
        self.max_dead_letter_bytes = max_dead_letter_bytes
        self.base_delay_s = base_delay_s

    def _workers(self, http: httpx.AsyncClient) -> list[ChannelWorker]:
        extra: dict[str, Any] = {} if self.base_delay_s is None else {"base_delay_s": self.base_delay_s}
        return [ChannelWorker(c, http, self.links, self.marks, **extra) for c in self.channels]

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish what was taken (each within its channel's budget),
        commit, and return."""
        kafka = {"bootstrap_servers": bootstrap_hosts(self.bootstrap), **self.security.aiokafka_kwargs()}
        consumer = AIOKafkaConsumer(
            self.alerts_topic,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=_FETCH_WAIT_MS,
            metadata_max_age_ms=5_000,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=3_000,
            **kafka,
        )
        producer = AIOKafkaProducer(acks="all", **kafka)
        async with httpx.AsyncClient(transport=self.transport, follow_redirects=False) as http:
            workers = self._workers(http)
            await producer.start()
            try:
                await consumer.start()
                try:
                    await self._consume(consumer, producer, workers, stop)
                finally:
                    await consumer.stop()
            finally:
                for worker in workers:
                    await worker.close()
                await producer.stop()

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        workers: list[ChannelWorker],
        stop: asyncio.Event,
    ) -> None:
        offsets = _Offsets()
        room = asyncio.Semaphore(self.max_pending)
        tasks: set[asyncio.Task[None]] = set()

        failures: list[BaseException] = []

        async def handle(tp: TopicPartition, record: Any) -> None:
            try:
                await self._deliver(record, producer, workers)
            except asyncio.CancelledError:
                raise  # not done: the next notifier of the group reads it again
            except Exception as exc:  # a bug: the notifier starts again and reads it again
                failures.append(exc)
            else:
                offsets.done(tp, record.offset)
            finally:
                room.release()

        while not stop.is_set():
            if failures:
                raise failures[0]
            batch = await consumer.getmany(timeout_ms=200, max_records=500)
            for tp, records in batch.items():
                for record in records:
                    await room.acquire()
                    offsets.add(tp, record.offset)
                    task = asyncio.create_task(handle(tp, record))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            await self._commit(consumer, offsets)
        if tasks:  # a stop: what finishes within the grace is committed; the rest is read again later
            _, late = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._commit(consumer, offsets)

    async def _commit(self, consumer: AIOKafkaConsumer, offsets: _Offsets) -> None:
        done = offsets.committable()
        if not done:
            return
        try:
            await consumer.commit(done)
        except KafkaError as exc:  # a rebalance: the next owner re-reads them; the marks skip what was sent
            log.warning("notify: committing offsets failed (%s); they will be read again", type(exc).__name__)

    async def _deliver(self, record: Any, producer: AIOKafkaProducer, workers: list[ChannelWorker]) -> None:
        raw: bytes = record.value or b""
        try:
            alert = Alert.model_validate_json(raw)
        except ValidationError as exc:
            reason = f"not an alert: {exc.errors()[0]['msg']}" if exc.errors() else "not an alert"
            await self._dead_letter(producer, record, None, reason)
            return
        age = time.time() - parse_time(alert.fired_at)
        if age > self.max_age_s:
            log.warning(
                "notify: alert %s fired %.0f s ago (more than %g s): not sent", alert.id, age, self.max_age_s
            )
            return
        targets = [w for w in workers if w.channel.takes(alert)]
        results = await asyncio.gather(*(w.submit(alert) for w in targets), return_exceptions=True)
        for worker, result in zip(targets, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                log.error("notify %s: alert %s failed: %r", worker.channel.name, alert.id, result)
                result = Outcome(worker.channel.name, False, f"internal error: {type(result).__name__}")
            if not result.delivered:
                log.warning(
                    "notify %s: alert %s (%s) not delivered after %d attempt(s): %s",
                    result.channel,
                    alert.id,
                    alert.status,
                    result.attempts,
                    result.answer,
                )
                reason = (
                    f"channel {worker.channel.name} ({worker.channel.kind}): {alert.status} notification not "
                    f"delivered after {result.attempts} attempt(s) in {result.elapsed_s:.1f} s; "
                    f"last answer: {result.answer}"
                )
                await self._dead_letter(producer, record, alert.id, reason)

    async def _dead_letter(
        self, producer: AIOKafkaProducer, record: Any, alert_id: str | None, reason: str
    ) -> None:
        raw: bytes = record.value or b""
        letter = DeadLetter(
            raw=base64.b64encode(raw).decode("ascii"),
            reason=reason,
            kind="undelivered",
            event_id=alert_id,
            source=DeadLetterSource(topic=record.topic, partition=record.partition, offset=record.offset),
            failed_at=format_time(time.time()),
            pipeline_version=__version__,
        )
        value = fit(letter, raw, max_bytes=self.max_dead_letter_bytes).model_dump_json().encode()
        delay = 0.5
        while True:  # the one publish that must not be skipped: its offset waits for it
            try:
                await producer.send_and_wait(
                    self.deadletter_topic, value, key=alert_id.encode() if alert_id else None
                )
                return
            except KafkaError as exc:
                log.warning(
                    "notify: dead letter not published (%s); retrying in %.1f s", type(exc).__name__, delay
                )
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)
