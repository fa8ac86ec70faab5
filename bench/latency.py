"""End-to-end latency of one worker (produce -> result consumed) at half its maximum rate, one run.

    python bench/latency.py [--events 20000] [--seconds 10] [--workload rules|demo] [--fraction 0.5]

1. max rate: one worker drains a backlog of ``--events`` events (as bench/throughput.py (b));
2. a fresh worker gets warm-up events until its first result arrives, then events at half that rate
   (``--fraction``)
   for ``--seconds``; each event's latency is (result read by this process) - (handed to the producer).
Prints p50 / p99 / max of step 2 and the achieved rate. Target: p99 < 100 ms. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

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
from aiokafka import AIOKafkaProducer

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, ensure_topics, produce


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="backlog for the max-rate run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the half-rate run")
    parser.add_argument("--workload", choices=("rules", "demo"), default="rules")
    parser.add_argument("--fraction", type=float, default=0.5, help="driven rate = this x the max rate")
    args = parser.parse_args()
    make = rule_events if args.workload == "rules" else demo_events
    config = write_config(RULE_SUITE) if args.workload == "rules" else ROOT / "examples" / "suites.yaml"
    redis_url, embedded = pick_redis()
    with EmbeddedBroker() as broker:
        topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
        backlog = make(args.events)
        await produce(broker.bootstrap, topics["requests"], backlog)
        step("1. max rate (backlog)")
        top = (await run_workers(broker.bootstrap, redis_url, topics, len(backlog), config)).rate
        rate = top * args.fraction
        total = int(rate * args.seconds)
        step(f"1. {top:.0f} events/s; 2. {rate:.0f} events/s for {args.seconds:g} s")

        topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
        templates = make(1000)
        sent: dict[str, float] = {}
        latencies: list[float] = []
        first_result = asyncio.Event()
        warm = 20

        def on_record(record: Record) -> None:
            first_result.set()
            at = sent.get(orjson.loads(record.value)["id"])
            if at is not None:
                latencies.append((time.perf_counter() - at) * 1000)

        def event(n: int) -> bytes:
            doc = orjson.loads(templates[n % len(templates)])
            return orjson.dumps({**doc, "id": f"lat-{n}"})

        async def drive() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=1)
            await producer.start()
            try:
                for n in range(warm):  # warm-up: not timed; lets the worker join its group first
                    await producer.send(topics["requests"], event(-1 - n))
                await first_result.wait()
                began = time.perf_counter()
                for n in range(total):
                    due = began + n / rate
                    delay = due - time.perf_counter()
                    if delay > 0.001:
                        await asyncio.sleep(delay)
                    value = event(n)
                    sent[f"lat-{n}"] = time.perf_counter()
                    await producer.send(topics["requests"], value)
                await producer.flush()
            finally:
                await producer.stop()

        driving = asyncio.ensure_future(drive())
        run = await run_workers(broker.bootstrap, redis_url, topics, total + warm, config, on_record=on_record)
        await driving
    if embedded:
        embedded.stop()
    achieved = (len(run.stamps) - warm) / (run.stamps[-1] - run.stamps[warm]) if len(run.stamps) > warm + 1 else 0
    print(f"workload {args.workload}; max rate {top:.0f} events/s; driven at {rate:.0f} events/s "
          f"(results arrived at {achieved:.0f}/s) for {args.seconds:g} s, n={len(latencies)}")  # fmt: skip
    print(f"end-to-end latency ms: p50 {_pct(latencies, .5):.1f}  p99 {_pct(latencies, .99):.1f}  "
          f"max {max(latencies):.1f}   (target p99 < 100)")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
