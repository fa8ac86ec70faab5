"""Plain aiokafka helpers shared by the CLI (produce, tail), the demo, the tests and the benchmarks.

Each takes ``security`` (streameval.kafka_security; default plaintext): TLS and SASL for every client.
A broker that does not answer is reported as :class:`~streameval.errors.BrokerUnavailable` (one line
for the CLI), not as aiokafka's ``KafkaConnectionError`` traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaConnectionError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)

from .connect_check import check_kafka
from .errors import BrokerUnavailable, ConnectFailed
from .kafka_security import KafkaSecurity, bootstrap_hosts

__all__ = ["PRODUCE_LINGER_MS", "Record", "collect", "ensure_topics", "produce", "tail"]

#: how long the producer waits to fill a batch; short, so a line piped to ``produce -`` leaves at once
PRODUCE_LINGER_MS = 5


async def _start(client: AIOKafkaProducer | AIOKafkaConsumer, bootstrap: str) -> None:
    try:
        await client.start()
    except KafkaConnectionError:
        await client.stop()
        raise BrokerUnavailable(
            f"no Kafka broker answered at {bootstrap}; is it running? "
            "(set KAFKA_BOOTSTRAP_SERVERS or pass --bootstrap)"
        ) from None


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


_PLAIN = KafkaSecurity()
_servers = bootstrap_hosts  # aiokafka takes host:port entries, without a kafka:// or SASL_SSL:// prefix


async def ensure_topics(
    bootstrap: str,
    names: Iterable[str],
    *,
    partitions: int = 1,
    replication: int = 1,
    timeout: float = 30.0,
    security: KafkaSecurity = _PLAIN,
) -> None:
    """Create the topics that do not exist yet (idempotent); waits for the broker up to ``timeout``.

    A wrong credential or TLS mismatch raises :class:`~streameval.errors.ConnectFailed` at once."""
    await check_kafka(bootstrap, security, timeout=timeout)
    admin = AIOKafkaAdminClient(
        bootstrap_servers=_servers(bootstrap), request_timeout_ms=10_000, **security.aiokafka_kwargs()
    )
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [NewTopic(n, partitions, replication) for n in dict.fromkeys(names) if n not in existing]
        if wanted:
            try:
                await admin.create_topics(wanted)
            except TopicAlreadyExistsError:  # another worker created it meanwhile
                pass
            except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError) as exc:  # broker ACLs
                raise ConnectFailed(
                    f"Kafka {bootstrap} ({security.describe()}): not allowed to create {', '.join(t.name for t in wanted)} "
                    f"({type(exc).__name__}); create the topics beforehand or grant CREATE"
                ) from None
    finally:
        await admin.close()


async def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes] | AsyncIterable[bytes],
    *,
    key: Callable[[bytes], bytes | None] = lambda _: None,
    on_sent: Callable[[int], None] | None = None,
    security: KafkaSecurity = _PLAIN,
) -> int:
    """Send every value to ``topic`` (acks=all), waiting for delivery; returns how many were sent.

    Values from an async iterable (e.g. lines read from stdin as they arrive) are sent as they come:
    each leaves within the producer's linger (:data:`PRODUCE_LINGER_MS`), not at the end.
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=_servers(bootstrap),
        acks="all",
        linger_ms=PRODUCE_LINGER_MS,
        **security.aiokafka_kwargs(),
    )
    await _start(producer, bootstrap)
    sent = 0
    try:
        pending: list[asyncio.Future[object]] = []
        async for value in _aiter(values):
            pending.append(await producer.send(topic, value=value, key=key(value)))
            sent += 1
            if len(pending) >= 500:
                await asyncio.gather(*pending)
                pending.clear()
                if on_sent:
                    on_sent(sent)
        await asyncio.gather(*pending)
        if on_sent:
            on_sent(sent)
    finally:
        await producer.stop()
    return sent


async def _aiter(values: Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(values, AsyncIterable):
        async for value in values:
            yield value
    else:
        for value in values:
            yield value


# How long a caught-up fetch may wait on the broker. Tansu holds a waiting fetch for all of it instead of
# answering when a record arrives (docs/performance.md), so this is added to the delay of an idle-then-busy
# topic; aiokafka's default is 500 ms. 50 ms costs a few empty fetches per second while idle.
TAIL_FETCH_MAX_WAIT_MS = 50


async def tail(
    bootstrap: str,
    topics: Sequence[str],
    *,
    from_beginning: bool = True,
    group_id: str | None = None,
    fetch_max_wait_ms: int = TAIL_FETCH_MAX_WAIT_MS,
    security: KafkaSecurity = _PLAIN,
) -> AsyncIterator[Record]:
    """Yield records of ``topics`` forever (no group: every partition, from the start by default)."""
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=_servers(bootstrap),
        **security.aiokafka_kwargs(),
        group_id=group_id,
        auto_offset_reset="earliest" if from_beginning else "latest",
        enable_auto_commit=group_id is not None,
        metadata_max_age_ms=5_000,
        fetch_max_wait_ms=fetch_max_wait_ms,
    )
    await _start(consumer, bootstrap)
    try:
        async for msg in consumer:
            yield Record(msg.topic, msg.partition, msg.offset, msg.key, msg.value or b"")
    finally:
        await consumer.stop()


async def collect(
    bootstrap: str,
    topics: Sequence[str],
    *,
    until: Callable[[list[Record]], bool],
    timeout: float,
    on_record: Callable[[Record], None] | None = None,
    fetch_max_wait_ms: int = TAIL_FETCH_MAX_WAIT_MS,
    security: KafkaSecurity = _PLAIN,
) -> list[Record]:
    """Read ``topics`` from the beginning until ``until(records)`` is true; ``TimeoutError`` after ``timeout``."""
    records: list[Record] = []

    async def run() -> None:
        async for record in tail(bootstrap, topics, fetch_max_wait_ms=fetch_max_wait_ms, security=security):
            records.append(record)
            if on_record:
                on_record(record)
            if until(records):
                return

    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        raise TimeoutError(
            f"gave up after {timeout:.0f}s with {len(records)} records from {', '.join(topics)}"
        ) from None
    return records
