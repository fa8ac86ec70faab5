"""A worker with a judged suite: throughput against the ideal concurrency / latency, one run.

    python bench/worker_judges.py [--events 3000] [--latency-ms 200] [--concurrency 256]

Three simulated judges (seed 003 panel; a subprocess, ``streameval.judges.sim``) answer after a fixed
latency; each allows ``--concurrency`` requests in flight (``max_concurrency``). Every event calls all
three at once, so no worker can beat ideal = concurrency / latency events/s. Distinct outputs: no
judge cache hits. Prints the worker's rate (first result to last) and rate / ideal (target >= 0.9).
bench/judges.py measures the same without Kafka (the pipeline alone).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import uuid

import httpx
import orjson
from _worker import pick_redis, run_workers, step, topic_names, write_config

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import demo_judges
from streameval.kafka_io import ensure_topics, produce


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_up(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(200):
            try:
                await client.post(f"{url}/v1/chat/completions", json={"messages": []})
                return
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"the judge simulator at {url} did not start")


def _events(count: int) -> list[bytes]:
    return [orjson.dumps({"id": f"judged-{n}", "model": "bench-model", "input": "What is the capital of France?",
                          "output": f"The capital of France is Paris ({n}).", "expected": "Paris",
                          "category": "qa_simple"}) for n in range(count)]  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=256, help="max_concurrency of each judge")
    args = parser.parse_args()
    port = _free_port()
    sim = subprocess.Popen([sys.executable, "-m", "streameval.judges.sim", "--port", str(port),
                            "--latency-ms", str(args.latency_ms)], stdout=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    redis_url, embedded = pick_redis()
    try:
        await _wait_up(url)
        config = write_config({
            "judges": [{**j, "max_concurrency": args.concurrency} for j in demo_judges(url)],
            "suites": [{"name": "judged", "default": True, "evaluators": [{"evaluator": "exact_match"}], "judge": {}}],
        })  # fmt: skip
        events = _events(args.events)
        with EmbeddedBroker() as broker:
            topics = topic_names(uuid.uuid4().hex[:6])
            await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
            await produce(broker.bootstrap, topics["requests"], events)
            step(f"worker with 3 judges at {args.latency_ms:g} ms, {args.concurrency} in flight each")
            run = await run_workers(broker.bootstrap, redis_url, topics, len(events), config)
    finally:
        sim.terminate()
        sim.wait(timeout=10)
        if embedded:
            embedded.stop()
    ideal = args.concurrency / (args.latency_ms / 1000)
    print(f"{len(events)} judged events; judges {args.latency_ms:g} ms, max_concurrency {args.concurrency}")
    print(f"worker {run.rate:.0f} events/s; ideal {ideal:.0f} events/s; ratio {run.rate / ideal:.3f} (target >= 0.9)")


if __name__ == "__main__":
    asyncio.run(main())
