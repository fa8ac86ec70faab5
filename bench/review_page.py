"""What the review page's list costs now that its scripts declare every key (Redis Cluster asks it).

    python bench/review_page.py [--items 1000] [--calls 40] [--rounds 3]

A fresh ``redis-server`` (a free loopback port, no persistence) keeps ``--items`` review items (a judged
event with a 600-character output each, as docs/feedback.md measured), then the queue's list is read
``--calls`` times per round in two ways, alternating:

* baseline: the former list, one script that walks the index and reads every item's keys without being
  given them (fine on one Redis, not what Redis Cluster allows);
* now: :meth:`ReviewPageStore.summaries`' calls, without the Python objects: the index read, then one
  script given each item's two keys.

Printed per list: the median wall time in this client, Redis CPU (``used_cpu_sys + used_cpu_user`` from
``INFO`` before and after) and the ratio to the baseline of the same round. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _feedback_helpers import result

from streameval.features.review import ReviewConfig, ReviewQueue
from streameval.features.review_page import ReviewPageStore, _scripts
from streameval.keyspace import Keys

# the list before its keys were declared: KEYS idx, ARGV the prefix; reads m:K and r:K of every item
BASELINE_LIST = """
local out = {}
for _, k in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  local meta = redis.call('HGETALL', ARGV[1] .. 'm:' .. k)
  if #meta > 0 then
    out[#out + 1] = {k, meta, redis.call('HGETALL', ARGV[1] .. 'r:' .. k)}
  end
end
if #out == 0 then return '[]' end
return cjson.encode(out)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _fill(client: aioredis.Redis, items: int) -> ReviewPageStore:
    config = ReviewConfig(rate_per_min=100_000, control_rate=0.0, keep=items)
    store = ReviewPageStore(client, "bench:", config)
    keys = Keys("bench:")
    queue = ReviewQueue(client, keys, config, keeper=store)
    for start in range(0, items, 100):
        fresh: list[tuple[str, Any, bytes | None]] = [
            (
                keys.pair_id("m", "qa"),
                result(f"e{i}", {"alpha": 9.0, "beta": 1.0}),
                orjson.dumps({"id": f"e{i}", "model": "m", "input": "q", "output": "x" * 600}),
            )
            for i in range(start, min(items, start + 100))
        ]
        chosen = await queue.select(fresh, 1_795_255_231.0 + start)
        await store.keep(chosen, fresh)
    return store


async def _run(args: argparse.Namespace) -> None:
    port = _free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    client = aioredis.Redis(port=port)
    try:
        for _ in range(100):
            try:
                await client.ping()
                break
            except OSError:
                await asyncio.sleep(0.05)  # the server's start
        store = await _fill(client, args.items)
        base = store.base
        baseline = client.register_script(BASELINE_LIST)
        now = client.register_script(_scripts.LIST)

        async def before() -> Any:
            return await baseline(keys=[base + "idx"], args=[base])

        async def after() -> Any:
            kept = [k.decode() for k in await client.zrevrange(base + "idx", 0, -1)]
            return await now(keys=[f"{base}{part}:{k}" for k in kept for part in ("m", "r")], args=kept)

        assert orjson.loads(await before()) == orjson.loads(await after())
        ways: list[tuple[str, Callable[[], Awaitable[Any]]]] = [("baseline", before), ("now", after)]
        print(f"{args.items} kept items; per list: median wall in the client, Redis CPU")
        for n in range(args.rounds):
            measured: dict[str, tuple[float, float]] = {}
            for name, call in ways:
                await call()
                cpu0, walls = await _cpu(client), []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    await call()
                    walls.append(time.perf_counter() - t0)
                measured[name] = (
                    statistics.median(walls) * 1000,
                    (await _cpu(client) - cpu0) / args.calls * 1000,
                )
            (bw, bc), (nw, nc) = measured["baseline"], measured["now"]
            print(
                f"round {n + 1}: baseline {bw:.1f} ms wall, {bc:.2f} ms Redis CPU; "
                f"now {nw:.1f} ms wall (x{nw / bw:.2f}), {nc:.2f} ms Redis CPU (x{nc / bc:.2f})"
            )
    finally:
        await client.aclose()
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(_run(parser.parse_args()))


if __name__ == "__main__":
    main()
