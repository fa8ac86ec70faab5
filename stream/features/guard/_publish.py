"""``publish: true`` (docs/guard.md): each checked event also goes to the requests topic, so the stream's
monitoring, windows, alerts and review see guarded traffic. The stream counts an event once by its id,
so a check repeated with the same id (a client's retry, a redelivery) is graded and counted once."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer

from ...kafka_security import KafkaSecurity, bootstrap_hosts

__all__ = ["SOURCE_HEADER", "KafkaPublisher"]

#: the Kafka header every published check carries: who put the event on the topic
SOURCE_HEADER = ("streameval-source", b"guard")
_SEND_TIMEOUT_S = 15.0


class KafkaPublisher:
    """Sends checked events (key: the event id) and waits for the broker's acknowledgement (acks=all). The
    producer starts at the first send, so a server whose broker is down still answers checks."""

    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity) -> None:
        self.bootstrap, self.topic, self.security = bootstrap, topic, security
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()

    async def send(self, key: bytes, value: bytes) -> None:
        async with asyncio.timeout(_SEND_TIMEOUT_S):
            if self._producer is None:
                async with self._lock:
                    if self._producer is None:
                        producer = AIOKafkaProducer(
                            bootstrap_servers=bootstrap_hosts(self.bootstrap),
                            acks="all",
                            linger_ms=1,
                            request_timeout_ms=int(_SEND_TIMEOUT_S * 1000),
                            **self.security.aiokafka_kwargs(),
                        )
                        try:
                            await producer.start()
                        except BaseException:
                            await producer.stop()
                            raise
                        self._producer = producer
            await self._producer.send_and_wait(self.topic, value=value, key=key, headers=[SOURCE_HEADER])

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
