"""The version comparison's cost: compact per-event scores (bytes per event in Redis) and the compare query.

    python bench/compare.py [--events 100000] [--batch 256]

On a fresh ``redis-server`` (free loopback port, no persistence) this records ``--events`` results of one
model × suite under two versions (the demo's ``qa`` suite and a softer candidate, over the demo events
with fresh ids), as the worker does (``ResultStore.record_many``), then answers
``GET /api/v1/stats/compare`` the way the API does: the two versions' compact strings read back
(``streameval.features.compare.compact_scores``) and compared (``streameval.features.compare.compare``). Printed: the compact
records' bytes per event (``MEMORY USAGE`` of the ``sc`` strings ÷ events), the query's wall and CPU
time (read + parse, and the statistics) over five runs, and, as the baseline of the same run, reading one
version's all-time hash (what the dashboard's pairs page costs per pair). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from redis_cost import _start_node  # noqa: E402

A = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators:
      - {evaluator: exact_match_normalized, weight: 2}
      - {evaluator: token_f1, weight: 1}
      - {evaluator: contains, params: {ignore_case: true}, weight: 1}
"""
B = A.replace(
    "exact_match_normalized, weight: 2", "similarity, params: {algorithm: levenshtein}, weight: 2"
).replace("threshold: 0.6", "threshold: 0.45")


async def run(events: int, batch: int, port: int) -> None:
    import orjson
    import redis.asyncio as aioredis

    from streameval.config import parse_config_text
    from streameval.features.compare import CompactScoresRecorder, compact_scores, compare
    from streameval.keyspace import Keys
    from streameval.pipeline import Pipeline, Source
    from streameval.store import ResultStore

    lines = []
    for raw in (ROOT / "examples" / "events.jsonl").read_bytes().splitlines():
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:  # the demo file holds bad events on purpose
            continue
        if isinstance(doc, dict) and isinstance(doc.get("id"), str) and isinstance(doc.get("output"), str):
            lines.append(doc)
    client = aioredis.Redis(port=port)
    store = ResultStore(
        client, prefix="bench:", windows=(60, 3600), recorders=[CompactScoresRecorder(3 * 86400)]
    )
    versions = []
    for text in (A, B):
        _, suites = parse_config_text(textwrap.dedent(text))
        pipeline = Pipeline(suites)
        version = suites.by_name["qa"].version
        versions.append(version)
        pending = []
        for i in range(events):
            doc = {**lines[i % len(lines)], "id": str(uuid.UUID(int=i + 1)), "model": "m", "suite": "qa"}
            doc.pop("category", None)
            doc.pop("timestamp", None)
            outcome = pipeline.process_sync(orjson.dumps(doc), Source(), time.time())
            if outcome is None or outcome.result is None:
                continue
            pending.append((outcome.result, outcome.result.model_dump_json().encode(), outcome.counters))
            if len(pending) >= batch:
                await store.record_many(pending)
                pending = []
        if pending:
            await store.record_many(pending)
    keys = Keys("bench:")
    sizes = []
    for version in versions:
        pair = keys.pair_id("m", "qa", version)
        found = [
            k
            async for k in client.scan_iter(
                match=keys.pair(pair).replace("{", "\\{").replace("}", "\\}") + "sc:*"
            )
        ]
        sizes.append(sum([await client.memory_usage(k) or 0 for k in found]))
    print(f"{events} events per version, suite qa, {len(versions)} versions")
    print(
        f"compact scores: {sizes[0] / events:.1f} and {sizes[1] / events:.1f} bytes/event in Redis "
        f"(MEMORY USAGE of the sc strings)"
    )

    walls, cpus, stats_cpu = [], [], []
    result = {}
    for _ in range(5):
        wall, cpu = time.perf_counter(), time.process_time()
        loaded = [
            await compact_scores(client, keys, keys.pair_id("m", "qa", v), ttl_s=3 * 86400, now=time.time())
            for v in versions
        ]
        mid = time.process_time()
        result = compare(loaded[0][0], loaded[1][0], names_a=loaded[0][1], names_b=loaded[1][1])
        stats_cpu.append(time.process_time() - mid)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    base = []
    for _ in range(5):
        wall = time.perf_counter()
        await client.hgetall(keys.all_time(keys.pair_id("m", "qa", versions[0])))
        base.append(time.perf_counter() - wall)
    print(
        f"pass rates {result['pass_rate_a']:.3f} -> {result['pass_rate_b']:.3f}; mean {result['mean_a']:.3f} -> {result['mean_b']:.3f}"
    )
    print(
        f"compare query: n {result['n']}, flips {result['pass_to_fail']}/{result['fail_to_pass']}, "
        f"wall {statistics.median(walls) * 1000:.0f} ms (median of 5), CPU {statistics.median(cpus) * 1000:.0f} ms "
        f"of which statistics {statistics.median(stats_cpu) * 1000:.0f} ms"
    )
    print(
        f"baseline (one all-time hash read): {statistics.median(base) * 1000:.2f} ms; "
        f"ratio {statistics.median(walls) / statistics.median(base):.0f}x"
    )
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        port, proc = _start_node(directory)
        try:
            asyncio.run(run(args.events, args.batch, port))
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
