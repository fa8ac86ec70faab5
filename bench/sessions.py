"""What sessions cost: turns appended and sessions closed, against plain events, in one run.

    python bench/sessions.py [--conversations 10000] [--partitions 6] [--gap-s 2] [--batch 256]
                             [--open 1000000] [--seed N] [--profile]

One fresh ``redis-server`` (free loopback port, no persistence). Conversations of 5-20 turns each, turns
interleaved over ``--partitions`` partitions (by turn id) and, within a conversation, out of order by up
to gap_s / 2 (arrival = event time + a random delay in [0, gap_s / 2)). The same events go through the
worker's :class:`~streameval.processor.Processor` twice, in batches of ``--batch`` per partition, round
robin: once with a suite file without sessions (the baseline: plain events), once with one session on
``metadata.conversation_id`` (turns: each event is also appended to its conversation). Printed:

* Redis CPU µs per event (``INFO cpu``, sys + user) and the ratio turn / plain event;
* worker CPU µs per event (``time.process_time``: evaluate, record, append) and the ratio;
* bytes per open session (``used_memory`` delta of the sessions run minus the plain run's, per session);
* closing: the session closer runs every second until every conversation is published; latency from
  each session's deadline to its publication (p50, p99) and from its last turn's arrival (p50, p99),
  closer CPU (worker and Redis) per session closed;
* the closer with ``--open`` open sessions waiting in the due index (deadlines in the future): CPU and
  wall time of one closer run, against the same run with an empty index.

``--callgrind`` runs that ``redis-server`` under ``valgrind --tool=callgrind`` (``hz 1``, active expiry
off) and also prints Redis instructions per event of each run (counters zeroed before a run, dumped after
it, with ``callgrind_control``): they repeat exactly however loaded the box is, where CPU time moves by
±15 % between runs here. About 50 times slower: use it with ``--conversations 2000 --open 0``.

Nothing is asserted. Event times are an hour in the past, so each session's deadline is its last arrival
+ ``windowing.allowed_lateness_s`` (5 s; docs/sessions.md, "Closing").
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import random
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_cost import _start_node

from streameval.config import parse_config_text
from streameval.features.sessions.closer import SessionCloser
from streameval.features.sessions.state import (
    META_FIELDS,
    META_FORMAT,
    SessionKeys,
    SessionStore,
    session_terms,
)
from streameval.features.sessions.step import AppendTurns
from streameval.features.setup import annotators
from streameval.models import SessionResult, format_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore

PROFILE = False  # --profile: Redis commandstats per event of each run
CALLGRIND: tuple[int, str] | None = None  # --callgrind: the valgrind'd server's pid and its output file


def _start_callgrind(directory: str) -> tuple[int, subprocess.Popen[bytes]]:
    """``redis-server`` under callgrind on a free loopback port, answering PING once this returns."""
    global CALLGRIND
    out = str(Path(directory) / "callgrind.out")
    port, proc = _start_node(
        directory,
        wrapper=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"],
        options=["--hz", "1", "--enable-debug-command", "yes"],
        timeout_s=60,
    )
    CALLGRIND = (proc.pid, out)
    return port, proc


def _callgrind(command: str) -> int:
    """Zero (``-z``) or dump (``-d``: returns the instructions since the last zero) the server's counters."""
    assert CALLGRIND is not None
    pid, out = CALLGRIND
    before = set(glob.glob(out + ".*"))
    subprocess.run(["callgrind_control", command, str(pid)], check=True, capture_output=True)
    if command != "-d":
        return 0
    [dump] = set(glob.glob(out + ".*")) - before
    for line in Path(dump).read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {dump}")


SUITES = """
suites:
  - name: chat
    default: true
    evaluators: [{evaluator: exact_match}, {evaluator: similarity, weight: 2}]
"""
SESSIONS = """
sessions:
  - name: conv
    key: metadata.conversation_id
    gap_s: {gap}
    evaluators: [{{evaluator: turn_scores}}, {{evaluator: thread_clean, weight: 0}}, {{evaluator: adaptability, weight: 0}}]
"""


def conversations(n: int, gap: float, seed: int) -> tuple[list[tuple[float, bytes, str]], int]:
    """(arrival, event, conversation) in arrival order, and the number of turns."""
    rng = random.Random(seed)
    base = time.time() - 3600
    out = []
    for c in range(n):
        t = base + rng.uniform(0, 600)
        for i in range(rng.randint(5, 20)):
            t += rng.uniform(0.1, gap / 2)
            answer = rng.choice(["Paris", "Paris.", "Lyon", "paris"])
            event = {
                "id": f"c{c}-t{i}",
                "model": f"m{c % 3}",
                "input": f"question {i} of conversation {c}",
                "output": answer,
                "expected": "Paris",
                "timestamp": format_time(t),
                "category": "qa_simple",
                "metadata": {"conversation_id": f"conv-{c}", "domain": rng.choice(["geo", "history"])},
            }
            out.append((t + rng.uniform(0, gap / 2), orjson.dumps(event), f"conv-{c}"))
    out.sort(key=lambda x: x[0])
    return out, len(out)


def partitioned(
    events: list[tuple[float, bytes, str]], partitions: int, batch: int
) -> list[list[tuple[bytes, Source]]]:
    """Batches per partition in arrival order, taken round robin (as workers interleave partitions)."""
    queues: list[list[tuple[bytes, Source]]] = [[] for _ in range(partitions)]
    for _, raw, _ in events:
        p = zlib.crc32(orjson.loads(raw)["id"].encode()) % partitions
        queues[p].append((raw, Source("requests", p, len(queues[p]))))
    batches = []
    for start in range(0, max(len(q) for q in queues), batch):
        batches += [q[start : start + batch] for q in queues if q[start : start + batch]]
    return batches


async def redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def used_memory(client: aioredis.Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def run_events(
    client: aioredis.Redis,
    text: str,
    prefix: str,
    batches: list[list[tuple[bytes, Source]]],
    with_sessions: bool,
) -> tuple[float, float, int, Any]:
    """Worker CPU s, Redis CPU s and memory delta of processing every batch; and the parts for closing."""
    _, suites = parse_config_text(text)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(client, prefix=prefix, windows=(60,))
    state = (
        SessionStore(client, session_terms(suites.sessions), prefix=prefix, worker_id="bench")
        if with_sessions
        else None
    )
    processor = Processor(pipeline, store, steps=[AppendTurns(state)])
    await processor.process_batch(batches[0][:1])  # warm: scripts loaded, pairs admitted
    await client.config_resetstat()
    if CALLGRIND:
        _callgrind("-z")
    memory, cpu, redis0 = await used_memory(client), time.process_time(), await redis_cpu(client)
    for batch in batches:
        await processor.process_batch(batch)
    worker = time.process_time() - cpu
    redis = await redis_cpu(client) - redis0
    if CALLGRIND:
        events = sum(len(b) for b in batches)
        instructions = _callgrind("-d")
        print(
            f"{'sessions' if with_sessions else 'plain'}: Redis instructions per event {instructions / events:,.0f}"
        )
    if PROFILE:
        events = sum(len(b) for b in batches)
        stats = await client.info("commandstats")
        print(
            ("sessions" if with_sessions else "plain")
            + ": "
            + ", ".join(
                f"{k[8:]} {v['calls'] / events:.2f}/event {v['usec'] / events:.1f} µs"
                for k, v in sorted(stats.items(), key=lambda kv: -kv[1]["usec"])[:6]
            )
        )
    return worker, redis, await used_memory(client) - memory, (pipeline, store, state, suites)


async def close_all(
    client: aioredis.Redis, parts: Any, sessions: int, arrivals: dict[str, float]
) -> dict[str, float]:
    pipeline, store, state, suites = parts
    closer = SessionCloser(state, store, pipeline, suites.sessions)
    published: list[tuple[float, SessionResult]] = []

    async def send(message: Publish) -> None:
        published.append((time.time(), SessionResult.model_validate_json(message.value)))

    deadlines: dict[str, float] = {}
    for shard in range(state.keys.shards):
        for member, score in await client.zrange(state.keys.due(shard), 0, -1, withscores=True):
            deadlines[SessionKeys.split(member.decode())[1]] = score / 1000  # the index holds ms
    cpu, redis0, wall = time.process_time(), await redis_cpu(client), time.monotonic()
    while len(published) < sessions:
        tick = time.monotonic()
        await closer.run_once(send)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        if time.monotonic() - wall > 600:
            break
    worker, redis = time.process_time() - cpu, await redis_cpu(client) - redis0
    delay = sorted(at - deadlines[r.key] for at, r in published)
    since_last = sorted(at - arrivals[r.key] for at, r in published)
    q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return {
        "closed": len(published),
        "delay_p50": q(delay, 0.5),
        "delay_p99": q(delay, 0.99),
        "since_last_p50": q(since_last, 0.5),
        "since_last_p99": q(since_last, 0.99),
        "worker_us": worker / max(1, len(published)) * 1e6,
        "redis_us": redis / max(1, len(published)) * 1e6,
    }


async def closer_with_open(client: aioredis.Redis, parts: Any, prefix: str, n: int) -> dict[str, float]:
    """One closer run (nothing due) with ``n`` sessions waiting in the index, against an empty index."""
    pipeline, store, _, suites = parts
    state = SessionStore(client, session_terms(suites.sessions), prefix=prefix + "open:", worker_id="bench")
    closer = SessionCloser(state, store, pipeline, suites.sessions)

    async def send(message: Publish) -> None:
        raise AssertionError("nothing is due")

    async def one_run() -> tuple[float, float, float]:
        runs = 20
        cpu, redis0, wall = time.process_time(), await redis_cpu(client), time.perf_counter()
        for _ in range(runs):
            await closer.run_once(send)
        return (
            (time.process_time() - cpu) / runs * 1e6,
            (await redis_cpu(client) - redis0) / runs * 1e6,
            (time.perf_counter() - wall) / runs * 1e3,
        )

    empty = await one_run()
    future = time.time() + 86400
    chunk = 10_000
    for start in range(0, n, chunk):
        async with client.pipeline(transaction=False) as pipe:
            members: dict[int, list[Any]] = {}
            for i in range(start, min(n, start + chunk)):
                tag = SessionKeys.tag("conv", f"open-{i}")
                members.setdefault(state.keys.shard(tag), []).extend([int((future + i % 3600) * 1000), tag])
            for shard, values in members.items():
                pipe.execute_command("ZADD", state.keys.due(shard), *values)
            await pipe.execute()
    full = await one_run()
    return {
        "open": n,
        "empty_worker_us": empty[0],
        "empty_redis_us": empty[1],
        "empty_ms": empty[2],
        "full_worker_us": full[0],
        "full_redis_us": full[1],
        "full_ms": full[2],
    }


async def main_async(args: argparse.Namespace) -> None:
    events, turns = conversations(args.conversations, args.gap_s, args.seed)
    batches = partitioned(events, args.partitions, args.batch)
    arrivals: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        port, proc = (_start_callgrind if args.callgrind else _start_node)(directory)
        client = aioredis.Redis(port=port)
        try:
            if args.callgrind:
                await client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
            plain = await run_events(client, SUITES, "plain:", batches, with_sessions=False)
            text = SUITES + SESSIONS.replace("{gap}", str(args.gap_s)).replace("{{", "{").replace("}}", "}")
            sess = await run_events(client, text, "sess:", batches, with_sessions=True)
            arrivals.update(
                dict.fromkeys((conv for _, _, conv in events), 0.0)
            )  # each one's last arrival, from its meta:
            state = sess[3][2]
            async with client.pipeline(transaction=False) as pipe:
                keys = list(arrivals)
                for conv in keys:
                    pipe.hget(state.keys.keys(SessionKeys.tag("conv", conv))[1], "v")
                for conv, value in zip(keys, await pipe.execute(), strict=True):
                    arrivals[conv] = struct.unpack(META_FORMAT, value)[META_FIELDS.index("arrival")]
            n = args.conversations
            print(
                f"{n} conversations, {turns} turns ({turns / n:.1f} per conversation), {args.partitions} partitions, "
                f"batches of {args.batch}, gap_s {args.gap_s}, out of order by up to gap_s/2"
            )
            pw, pr = plain[0] / turns * 1e6, plain[1] / turns * 1e6
            sw, sr = sess[0] / turns * 1e6, sess[1] / turns * 1e6
            print(f"Redis CPU per event:  plain {pr:7.1f} µs   turn {sr:7.1f} µs   ratio {sr / pr:.2f}x")
            print(f"worker CPU per event: plain {pw:7.1f} µs   turn {sw:7.1f} µs   ratio {sw / pw:.2f}x")
            print(
                f"bytes per open session: {(sess[2] - plain[2]) / n:.0f} "
                f"(sessions run {sess[2] / n:.0f} per conversation, plain run {plain[2] / n:.0f})"
            )
            closing = await close_all(client, sess[3], n, arrivals)
            print(
                f"closing {closing['closed']} sessions: deadline -> published p50 {closing['delay_p50']:.2f} s, "
                f"p99 {closing['delay_p99']:.2f} s; last turn -> published p50 {closing['since_last_p50']:.2f} s, "
                f"p99 {closing['since_last_p99']:.2f} s; closer CPU per session: worker {closing['worker_us']:.0f} µs, "
                f"Redis {closing['redis_us']:.0f} µs"
            )
            if args.open:
                o = await closer_with_open(client, sess[3], "sess:", args.open)
                print(
                    f"closer run, nothing due: empty index {o['empty_ms']:.2f} ms (worker {o['empty_worker_us']:.0f} µs, "
                    f"Redis {o['empty_redis_us']:.0f} µs); {o['open']} open sessions {o['full_ms']:.2f} ms "
                    f"(worker {o['full_worker_us']:.0f} µs, Redis {o['full_redis_us']:.0f} µs); "
                    f"ratio {o['full_ms'] / o['empty_ms']:.2f}x wall, "
                    f"{o['full_redis_us'] / max(o['empty_redis_us'], 1e-9):.2f}x Redis CPU"
                )
        finally:
            await client.aclose()
            proc.terminate()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--gap-s", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--open", type=int, default=1_000_000, help="open sessions for the closer's cost; 0: skip"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="Redis commandstats per event of each run")
    parser.add_argument(
        "--callgrind", action="store_true", help="Redis under callgrind: instructions per event of each run"
    )
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
