"""End-to-end latency of one worker (produce -> result consumed) at half its maximum rate, one run.

    python bench/latency.py [--events 20000] [--seconds 10] [--workload rules|demo] [--fraction 0.5]
                            [--rate R] [--dump FILE]

1. max rate: one worker drains a backlog of ``--events`` events (as bench/throughput.py (b));
   ``--rate R`` skips this and drives at R events/s;
2. (a) baseline: a raw aiokafka consume -> transform -> produce loop (fetch wait and linger as the
   worker's defaults) gets the events at half that rate (``--fraction``) for ``--seconds``: what the
   broker and the Kafka clients alone add;
   (b) a fresh worker gets warm-up events until its first result arrives, then the same events at
   the same rate.
Each event's latency is (output read by this process) - (handed to the producer); outputs are keyed by
event id, so the reader decodes nothing. Prints p50 / p99 / max of both and the achieved rates.
Target: the worker's p99 < 100 ms. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from _worker import (
    ROOT,
    RULE_SUITE,
    demo_events,
    pick_redis,
    rule_events,
    run_workers,
    step,
    topic_names,
    write_config,
)
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.settings import Settings

WARM = 20  # untimed events first: the worker joins its group (~6 s on Tansu) and warms up


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Run:
    """Drive ``total`` events at ``rate`` into ``topics['requests']``; time each output on ``topics['results']``."""

    def __init__(self, bootstrap: str, topics: dict[str, str], prepared: list[bytes], rate: float) -> None:
        self.bootstrap, self.topics, self.prepared, self.rate = bootstrap, topics, prepared, rate
        self.sent: dict[bytes, float] = {}
        self.latencies: list[float] = []
        self.when: list[float] = []
        self.arrivals: list[float] = []
        self.first = asyncio.Event()

    def on_record(self, record: Record) -> None:
        self.first.set()
        at = self.sent.get(record.key or b"")
        if at is not None:
            now = time.perf_counter()
            self.latencies.append((now - at) * 1000)
            self.when.append(at)
            self.arrivals.append(now)

    async def drive(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=1)
        await producer.start()
        try:
            for n in range(WARM):  # own ids: the worker would take a repeated id for a redelivery
                warm = orjson.dumps({**orjson.loads(self.prepared[0]), "id": f"warm-{n}"})
                await producer.send(self.topics["requests"], warm, key=f"warm-{n}".encode())
            await self.first.wait()
            began = time.perf_counter()
            for n, value in enumerate(self.prepared):
                delay = began + n / self.rate - time.perf_counter()
                if delay > 0.001:
                    await asyncio.sleep(delay)
                key = f"lat-{n}".encode()
                self.sent[key] = time.perf_counter()
                await producer.send(self.topics["requests"], value, key=key)
            await producer.flush()
        finally:
            await producer.stop()

    def summary(self, name: str) -> str:
        got = self.arrivals
        achieved = (len(got) - 1) / (got[-1] - got[0]) if len(got) > 1 else 0.0
        return (
            f"{name}: p50 {_pct(self.latencies, 0.5):6.1f}  p99 {_pct(self.latencies, 0.99):6.1f}  "
            f"max {max(self.latencies):6.1f} ms   (n={len(self.latencies)}, outputs at {achieved:.0f}/s)"
        )


async def _raw_forwarder(bootstrap: str, source: str, sink: str, fetch_wait_ms: int) -> None:
    """Consume -> parse, add a field, serialise -> produce, keeping the key; forever (cancel to stop)."""
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=fetch_wait_ms,
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await consumer.start()
    await producer.start()
    try:
        while True:
            for records in (await consumer.getmany(timeout_ms=1000, max_records=1000)).values():
                for msg in records:
                    event = orjson.loads(msg.value)
                    event["seen"] = True
                    await producer.send(sink, orjson.dumps(event), key=msg.key)
    finally:
        await consumer.stop()
        await producer.stop()


async def _measure(run: Run, consume: Callable[[Callable[[Record], None]], Awaitable[object]]) -> None:
    driving = asyncio.ensure_future(run.drive())
    try:
        await consume(run.on_record)
    finally:
        driving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driving


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="backlog for the max-rate run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the half-rate runs")
    parser.add_argument("--workload", choices=("rules", "demo"), default="rules")
    parser.add_argument("--fraction", type=float, default=0.5, help="driven rate = this x the max rate")
    parser.add_argument("--rate", type=float, help="drive at this many events/s instead (skips step 1)")
    parser.add_argument(
        "--dump", type=Path, help="write 'seconds since start, latency ms' of the worker's events"
    )
    args = parser.parse_args()
    make = rule_events if args.workload == "rules" else demo_events
    config = write_config(RULE_SUITE) if args.workload == "rules" else ROOT / "examples" / "suites.yaml"
    fetch_wait_ms = Settings().fetch_wait_ms
    redis_url, embedded = pick_redis()
    with EmbeddedBroker() as broker:
        if args.rate:
            top, rate = float("nan"), args.rate
        else:
            topics = topic_names(uuid.uuid4().hex[:6])
            await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
            backlog = make(args.events)
            await produce(broker.bootstrap, topics["requests"], backlog)
            step("1. max rate (backlog)")
            top = (await run_workers(broker.bootstrap, redis_url, topics, len(backlog), config)).rate
            rate = top * args.fraction
        total = int(rate * args.seconds)
        templates = make(1000)
        prepared = [
            orjson.dumps({**orjson.loads(templates[n % len(templates)]), "id": f"lat-{n}"})
            for n in range(total)
        ]

        step(f"1. {top:.0f} events/s; 2(a). raw aiokafka loop at {rate:.0f} events/s for {args.seconds:g} s")
        topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
        raw = Run(broker.bootstrap, topics, prepared, rate)
        forwarder = asyncio.ensure_future(
            _raw_forwarder(broker.bootstrap, topics["requests"], topics["results"], fetch_wait_ms)
        )
        try:
            await _measure(
                raw,
                lambda on_record: collect(
                    broker.bootstrap,
                    [topics["results"]],
                    until=lambda r: len(r) >= total + WARM,
                    timeout=600,
                    on_record=on_record,
                    fetch_max_wait_ms=5,
                ),
            )
        finally:
            forwarder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await forwarder

        step(f"2(b). one worker at {rate:.0f} events/s for {args.seconds:g} s")
        topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
        worker = Run(broker.bootstrap, topics, prepared, rate)
        await _measure(
            worker,
            lambda on_record: run_workers(
                broker.bootstrap, redis_url, topics, total + WARM, config, on_record=on_record
            ),
        )
    if embedded:
        embedded.stop()
    if args.dump and worker.when:
        t0 = worker.when[0]
        args.dump.write_text(
            "".join(f"{t - t0:.4f} {ms:.2f}\n" for t, ms in zip(worker.when, worker.latencies, strict=True))
        )
    print(
        f"workload {args.workload}; max rate {top:.0f} events/s; driven at {rate:.0f} events/s for {args.seconds:g} s; "
        f"fetch wait {fetch_wait_ms} ms"
    )
    print(raw.summary("(a) raw aiokafka loop"))
    print(worker.summary("(b) streameval worker"))
    print(
        f"worker p99 {_pct(worker.latencies, 0.99):.1f} ms (target < 100); raw loop p99 {_pct(raw.latencies, 0.99):.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
