"""CPU per event of ``Processor.process_batch`` on the rule suite, with ``emit`` (the worker's path:
results recorded and handed out as soon as they need no judge) and without (one phase), alternated in
one process against real Redis (REDIS_URL, else 127.0.0.1:6379; keys under a bench prefix, deleted).

    python bench/early_path_cpu.py [--batches 8] [--rounds 6]

No broker and no judges: this isolates what the early path adds to a batch. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import redis.asyncio as aioredis
from _worker import RULE_SUITE, rule_events

from streameval.config import parse_config
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor, Publish
from streameval.store import ResultStore


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=8, help="batches of 256 events per round and side")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"streameval-bench:{uuid.uuid4().hex[:8]}:"
    _, suites = parse_config(RULE_SUITE)
    processor = Processor(Pipeline(suites), ResultStore(client, prefix=prefix, windows=(60,)))
    await processor.start()
    events = rule_events(256 * args.batches)

    async def emit(messages: list[Publish]) -> None:
        return None

    cpu = {"with emit": 0.0, "without": 0.0}
    count = {"with emit": 0, "without": 0}
    try:
        for n in range(args.rounds):
            for label in ("with emit", "without") if n % 2 else ("without", "with emit"):
                tag = uuid.uuid4().hex[:6].encode()
                fresh = [raw.replace(b'"id":"', b'"id":"' + tag, 1) for raw in events]
                started = time.process_time()
                for j in range(0, len(fresh), 256):
                    batch = [(raw, Source("bench", 0, j + i)) for i, raw in enumerate(fresh[j : j + 256])]
                    await processor.process_batch(batch, emit=emit if label == "with emit" else None)
                cpu[label] += time.process_time() - started
                count[label] += len(fresh)
    finally:
        await processor.close()
        async for key in client.scan_iter(match=f"{prefix}*", count=1000):
            await client.delete(key)
        await client.aclose()
    per = {label: cpu[label] / count[label] * 1e6 for label in cpu}
    for label, us in per.items():
        print(f"{label:>10}: {us:7.1f} µs/event ({count[label]} events)")
    print(f"     ratio: with emit / without {per['with emit'] / per['without']:.3f}x")


if __name__ == "__main__":
    asyncio.run(main())
