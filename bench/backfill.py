"""Backfill throughput against the live worker's: same suite, same events, same broker and Redis, one run.

    python bench/backfill.py [--events 5000] [--workload rules|demo] [--batch 256]

(a) baseline: one ``streameval worker`` process (Faust) evaluates the events from a topic; rate from the
    first result to the last (the group join excluded), worker CPU per event (user + system);
(b) ``streameval backfill`` of the same suite over a topic holding the same events (its own Redis prefix,
    so the version is not live there): rate over the whole run (planning included), the process's CPU per
    event. Printed: both, and the ratio (b) / (a) of rates and of CPU per event. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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

from streameval.backfill import run_backfill
from streameval.config import load_config
from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce
from streameval.settings import load_settings


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--workload", choices=("rules", "demo"), default="rules")
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    if args.workload == "rules":
        events, config = rule_events(args.events), write_config(RULE_SUITE)
    else:
        events, config = demo_events(args.events), ROOT / "examples" / "suites.yaml"
    _, suites = load_config(config)
    redis_url, embedded = pick_redis()
    with EmbeddedBroker() as broker:
        live_topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, live_topics.values(), partitions=1)
        await produce(broker.bootstrap, live_topics["requests"], events)
        step(f"(a) one streameval worker over {len(events)} events (~6 s group join before timing)")
        live = await run_workers(broker.bootstrap, redis_url, live_topics, len(events), config)

        fill_topics = topic_names(uuid.uuid4().hex[:6])
        await ensure_topics(broker.bootstrap, fill_topics.values(), partitions=1)
        since = time.time() - 1
        await produce(broker.bootstrap, fill_topics["requests"], events)
        prefix = f"streameval-bench:{uuid.uuid4().hex[:8]}:"
        settings = load_settings(
            kafka_bootstrap_servers=broker.bootstrap,
            redis_url=redis_url,
            redis_prefix=prefix,
            app_id=f"bench-{uuid.uuid4().hex[:6]}",
            topic_requests=fill_topics["requests"],
            topic_results=fill_topics["results"],
        )
        step(f"(b) streameval backfill over the same {len(events)} events")
        cpu0, wall0 = _cpu_s(), time.perf_counter()
        report = await run_backfill(settings, suites, since_ms=int(since * 1000), batch=args.batch)
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
        import redis as sync_redis

        client = sync_redis.Redis.from_url(redis_url)
        stale = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if stale:
            client.delete(*stale)
        client.close()
    if embedded:
        embedded.stop()
    rate = report.results / wall
    cpu_us = cpu / max(1, report.results) * 1e6
    print(f"events: {len(events)} ({args.workload}), Redis {redis_url.split('@')[-1]}")
    print(f"(a) live worker: {live.rate:8.0f} events/s, {live.cpu_us_per_event:7.0f} µs CPU/event")
    print(
        f"(b) backfill:    {rate:8.0f} events/s, {cpu_us:7.0f} µs CPU/event ({report.results} results, "
        f"{report.counted} counted, {wall:.1f} s)"
    )
    print(
        f"ratio (b)/(a): throughput {rate / live.rate:.2f}x, CPU per event {cpu_us / live.cpu_us_per_event:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
