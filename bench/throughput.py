"""Throughput of the streameval worker against a raw aiokafka loop, same broker, same events, one run.

    python bench/throughput.py [--events 20000] [--config examples/suites.yaml]

(a) baseline: a raw aiokafka consume -> transform (parse, add a field, serialise) -> produce loop;
(b) a ``streameval worker`` process with a rule-only suite (the demo's suites: seed 001 presets).
Events are produced up front; each rate is measured from the first output record to the last, so
start-up (Faust's group join) is excluded. Prints events/s for each and the ratio last.
Redis: REDIS_URL, else 127.0.0.1:6379, else an embedded server. Nothing is asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import redis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import ValidationError

from streameval.embedded import EmbeddedBroker, EmbeddedRedis
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.models import RequestEvent

ROOT = Path(__file__).resolve().parent.parent


def make_events(count: int) -> list[bytes]:
    """``count`` valid events (the example file's valid lines with fresh ids): every one gives a result."""
    templates = []
    for line in (ROOT / "examples" / "events.jsonl").read_bytes().splitlines():
        try:
            event = RequestEvent.model_validate_json(line)
        except ValidationError:
            continue  # the example file's deliberately invalid lines
        if event.suite is None:
            templates.append(orjson.loads(line))
    return [orjson.dumps({**templates[i % len(templates)], "id": f"bench-{i}"}) for i in range(count)]


async def raw_loop(bootstrap: str, source: str, sink: str, count: int) -> float:
    """Events/s of consume -> transform -> produce with plain aiokafka."""
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=f"raw-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest", enable_auto_commit=True)  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await consumer.start()
    await producer.start()
    try:
        done = 0
        first = 0.0
        pending = []
        while done < count:
            batches = await consumer.getmany(timeout_ms=1000, max_records=1000)
            for records in batches.values():
                for msg in records:
                    if not first:
                        first = time.perf_counter()
                    event = orjson.loads(msg.value)
                    event["seen"] = True
                    pending.append(await producer.send(sink, orjson.dumps(event), key=msg.key))
                    done += 1
            if len(pending) > 2000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        return count / (time.perf_counter() - first)
    finally:
        await consumer.stop()
        await producer.stop()


async def worker_rate(bootstrap: str, redis_url: str, topics: dict[str, str], count: int, config: Path) -> float:
    prefix = f"streameval-bench:{uuid.uuid4().hex[:8]}:"
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url, "STREAMEVAL_CONFIG": str(config),
           "STREAMEVAL_APP_ID": f"bench-{uuid.uuid4().hex[:6]}", "STREAMEVAL_REDIS_PREFIX": prefix,
           "STREAMEVAL_LOG_LEVEL": "warn", "STREAMEVAL_TOPIC_PARTITIONS": "1",
           **{f"STREAMEVAL_TOPIC_{k.upper()}": v for k, v in topics.items()}}  # fmt: skip
    log = tempfile.NamedTemporaryFile(prefix="bench-worker-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "streameval", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    stamps: list[float] = []

    def on_record(_: Record) -> None:
        stamps.append(time.perf_counter())

    async def watch() -> None:
        while proc.poll() is None:
            await asyncio.sleep(0.5)
        raise RuntimeError(f"the worker exited with code {proc.returncode}; log: {log.name}")

    reading = asyncio.ensure_future(
        collect(bootstrap, [topics["results"]], until=lambda r: len(r) >= count, timeout=600, on_record=on_record)
    )
    watcher = asyncio.ensure_future(watch())
    try:
        done, _ = await asyncio.wait([reading, watcher], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # raises if the worker died or reading timed out
    finally:
        reading.cancel()
        watcher.cancel()
        proc.terminate()
        proc.wait(timeout=30)
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}*", count=5000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
    return (count - 1) / (stamps[-1] - stamps[0])


def step(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pick_redis() -> tuple[str, EmbeddedRedis | None]:
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
        return "redis://127.0.0.1:6379/0", None
    except OSError:
        server = EmbeddedRedis().start()
        return server.url, server


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--config", type=Path, default=ROOT / "examples" / "suites.yaml")
    args = parser.parse_args()
    events = make_events(args.events)
    redis_url, embedded = pick_redis()
    run = uuid.uuid4().hex[:6]
    with EmbeddedBroker() as broker:
        raw_in, raw_out = f"bench{run}.raw.in", f"bench{run}.raw.out"
        topics = {n: f"bench{run}.evals.{n}" for n in ("requests", "results", "deadletter", "alerts", "aggregates")}
        await ensure_topics(broker.bootstrap, [raw_in, raw_out, *topics.values()], partitions=1)
        step(f"producing {len(events)} events twice")
        await produce(broker.bootstrap, raw_in, events)
        await produce(broker.bootstrap, topics["requests"], events)
        step("(a) raw aiokafka loop")
        baseline = await raw_loop(broker.bootstrap, raw_in, raw_out, len(events))
        step(f"(a) {baseline:.0f} events/s; (b) streameval worker (includes ~6 s group join before timing)")
        ours = await worker_rate(broker.bootstrap, redis_url, topics, len(events), args.config)
    if embedded:
        embedded.stop()
    size = sum(map(len, events)) / len(events)
    print(f"events: {len(events)} (mean {size:.0f} bytes), one partition, Redis {redis_url.split('@')[-1]}")
    print(f"(a) raw aiokafka consume->transform->produce: {baseline:10.0f} events/s")
    print(f"(b) streameval worker, rule-only suite:        {ours:10.0f} events/s")
    print(f"ratio (b)/(a): {ours / baseline:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
