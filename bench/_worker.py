"""Shared by the worker benchmarks: events, the raw aiokafka baseline, worker subprocesses, Redis.

Not a benchmark itself. Every figure is measured from the first output record to the last, so start-up
(Faust's group join) is excluded. RSS is read from /proc (Linux).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import redis
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import ValidationError

from streameval.embedded import EmbeddedRedis
from streameval.kafka_io import Record, collect
from streameval.models import RequestEvent
from streameval.store import hash_fields

__all__ = [
    "ROOT",
    "RULE_SUITE",
    "WorkerRun",
    "demo_events",
    "pick_redis",
    "raw_eval_loop",
    "raw_loop",
    "rule_events",
    "run_workers",
    "slope_kb_per_100k",
    "step",
    "topic_names",
    "write_config",
]

ROOT = Path(__file__).resolve().parent.parent

# the rule-only benchmark suite: the evaluator-module spec's presets + token_f1 + rouge_l + bleu
# (300-token outputs)
RULE_SUITE = {
    "suites": [
        {
            "name": "rules",
            "default": True,
            "threshold": 0.5,
            "evaluators": [
                {"evaluator": "exact_match"},
                {"evaluator": "contains"},
                {"evaluator": "regex", "params": {"pattern": r"answer\s*(is|:)", "flags": "i"}},
                {"evaluator": "json_schema", "params": {"schema": {"type": "object"}}},
                {"evaluator": "similarity", "params": {"algorithm": "levenshtein"}},
                {"evaluator": "token_f1"},
                {"evaluator": "rouge_l"},
                {"evaluator": "bleu"},
            ],
        }
    ],
}

_WORDS = (
    "the model answers that a river flows north through the valley and the city grows along "
    "its banks while farmers plant wheat in spring and harvest it late in the summer"
).split()


def step(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def demo_events(count: int) -> list[bytes]:
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


def rule_events(count: int, tokens: int = 300, seed: int = 7) -> list[bytes]:
    """Events with ``tokens``-word outputs and a reference of the same length sharing most words."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        output = [rng.choice(_WORDS) for _ in range(tokens)]
        expected = [w if rng.random() < 0.8 else rng.choice(_WORDS) for w in output]
        out.append(
            orjson.dumps(
                {
                    "id": f"bench-{i}",
                    "model": "bench-model",
                    "input": "Describe the valley.",
                    "output": " ".join(output),
                    "expected": " ".join(expected),
                }
            )
        )
    return out


def write_config(config: dict[str, object]) -> Path:
    handle = tempfile.NamedTemporaryFile(prefix="bench-suites-", suffix=".json", delete=False)
    handle.write(orjson.dumps(config))  # JSON is YAML
    handle.close()
    return Path(handle.name)


def topic_names(run: str) -> dict[str, str]:
    return {n: f"bench{run}.evals.{n}" for n in ("requests", "results", "deadletter", "alerts", "aggregates")}


def pick_redis() -> tuple[str, EmbeddedRedis | None]:
    """REDIS_URL, else 127.0.0.1:6379, else an embedded server (stop it afterwards)."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
        return "redis://127.0.0.1:6379/0", None
    except OSError:
        server = EmbeddedRedis().start()
        return server.url, server


def _add_field(value: bytes) -> bytes:
    event = orjson.loads(value)
    event["seen"] = True
    return orjson.dumps(event)


async def raw_loop(
    bootstrap: str, source: str, sink: str, count: int, *, transform: Callable[[bytes], bytes] = _add_field
) -> float:
    """Events/s of consume -> transform (default: parse, add a field, serialise) -> produce with plain aiokafka."""
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
    )
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
                    pending.append(await producer.send(sink, transform(msg.value), key=msg.key))
                    done += 1
            if len(pending) > 2000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        return count / (time.perf_counter() - first)
    finally:
        await consumer.stop()
        await producer.stop()


async def raw_eval_loop(bootstrap: str, source: str, sink: str, count: int, config: Path) -> float:
    """Events/s of the same raw loop whose transform is the suite's evaluation, in-process: decode, route,
    evaluate, encode the graded result (no Faust, no Redis, no idempotency, no windows, one process)."""
    from streameval.config import load_config
    from streameval.pipeline import Pipeline, Source

    pipeline = Pipeline(load_config(config)[1])
    encode_outcome = outcome_encoder()

    def transform(value: bytes) -> bytes:
        outcome = pipeline.process_sync(value, Source(), time.time())
        if outcome is None:
            raise RuntimeError("the raw evaluation baseline needs a suite without judges or async evaluators")
        return encode_outcome(outcome)

    return await raw_loop(bootstrap, source, sink, count, transform=transform)


def outcome_encoder() -> Callable[[Any], bytes]:
    """The wire bytes of an outcome's result or dead letter, as the worker writes them: the result by
    ``encode_result`` (the same bytes as ``model_dump_json``) in code that has it, else by pydantic."""
    try:
        from streameval.models import encode_result
    except ImportError:  # code before the fourth pass (--before runs)

        def encode_result(result: Any) -> bytes:
            return bytes(result.model_dump_json().encode())

    def encode(outcome: Any) -> bytes:
        if outcome.result is not None:
            return encode_result(outcome.result)
        return bytes(outcome.dead_letter.model_dump_json().encode())

    return encode


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live child processes (evaluation processes)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += _cpu_s(int(child))
    except (OSError, IndexError, ValueError):
        return 0.0
    return total


def _rss_kb(pid: int) -> int:
    """Resident set of ``pid`` and its child processes (evaluation processes), kB."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += _rss_kb(int(child))
    except OSError:
        pass
    return total


@dataclass
class WorkerRun:
    """What a run saw: arrival time of every result, and (time, results so far, RSS kB of each worker)."""

    stamps: list[float] = field(default_factory=list)
    rss: list[tuple[float, int, list[int]]] = field(default_factory=list)
    cpu: list[tuple[int, float]] = field(default_factory=list)  # (results so far, CPU s of all workers)
    counted: list[tuple[float, int]] = field(
        default_factory=list
    )  # progress="redis": (time, events recorded)
    redis_cpu: list[tuple[int, float]] = field(
        default_factory=list
    )  # (results so far, CPU s of the Redis nodes)
    redis_cpu_whole_s: float = float(
        "nan"
    )  # CPU s of the Redis nodes from before the workers started to their stop
    redis_cpu_nodes_s: list[float] = field(
        default_factory=list
    )  # the same, of each node (redis_ports' order)
    tally: tuple[int, int, int] | None = None  # tally=True: (events in all-time counts, pairs, dead letters)

    @property
    def done(self) -> int:
        return self.counted[-1][1] if self.counted else len(self.stamps)

    @property
    def rate(self) -> float:
        if self.counted:
            flowing = [(t, n) for t, n in self.counted if n > 0]
            (t0, n0), (t1, n1) = flowing[0], flowing[-1]
            return (n1 - n0) / (t1 - t0) if t1 > t0 else float("nan")
        return (len(self.stamps) - 1) / (self.stamps[-1] - self.stamps[0])

    @property
    def cpu_us_per_event(self) -> float:
        """CPU time (user + system, workers and their evaluation processes) per result while results flowed.

        Unlike the rate it hardly moves when other programs share the cores: the figure to compare runs by.
        """
        return self._per_event(self.cpu)

    @property
    def redis_cpu_us_per_event(self) -> float:
        """CPU time of the Redis nodes (``redis_ports``, INFO cpu summed) per result while results flowed."""
        return self._per_event(self.redis_cpu)

    def _per_event(self, samples: list[tuple[int, float]]) -> float:
        flowing = [(n, cpu) for n, cpu in samples if 0 < n < self.done]
        if len(flowing) < 2 or flowing[-1][0] == flowing[0][0]:
            return float("nan")
        (n0, c0), (n1, c1) = flowing[0], flowing[-1]
        return (c1 - c0) / (n1 - n0) * 1e6


async def run_workers(
    bootstrap: str,
    redis_url: str,
    topics: dict[str, str],
    count: int,
    config: Path,
    *,
    workers: int = 1,
    partitions: int = 1,
    on_record: Callable[[Record], None] | None = None,
    started: Callable[[], object] | None = None,
    env: dict[str, str] | None = None,
    progress: Literal["results", "redis"] = "results",
    redis_ports: Sequence[int] = (),
    tally: bool = False,
    before_cleanup: Callable[[], object] | None = None,
) -> WorkerRun:
    """Start ``workers`` worker processes, read ``count`` results, stop them and delete their Redis keys.

    ``started`` is awaited (if it returns an awaitable) once the results reader is running, e.g. to
    produce the events at a fixed rate. ``progress="redis"`` reads no results: it counts the events the
    workers recorded in Redis (all-time aggregates) once a second, for runs too long for a reader to
    keep up with on Tansu (its fetches from a topic of a million records slow to ~100 records/s).
    ``redis_ports``: loopback Redis nodes (every master of a cluster) whose CPU (INFO cpu) is sampled
    with the workers'. ``tally``: once the workers stopped, read what they counted (all-time counts of
    every pair, dead letters) into ``WorkerRun.tally``. ``before_cleanup`` is called once the workers
    stopped, before their keys are deleted. ``redis_url`` may be ``redis+cluster://``.
    """
    prefix = f"streameval-bench:{uuid.uuid4().hex[:8]}:"
    app_id = f"bench-{uuid.uuid4().hex[:6]}"
    base = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "REDIS_URL": redis_url,
        "STREAMEVAL_CONFIG": str(config),
        "STREAMEVAL_APP_ID": app_id,
        "STREAMEVAL_REDIS_PREFIX": prefix,
        "STREAMEVAL_LOG_LEVEL": "warn",
        "STREAMEVAL_TOPIC_PARTITIONS": str(partitions),
        **{f"STREAMEVAL_TOPIC_{k.upper()}": v for k, v in topics.items()},
        **(env or {}),
    }
    nodes = [redis.Redis(port=port) for port in redis_ports]

    def redis_cpu_each() -> list[float]:
        return [
            float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]) for cpu in (n.info("cpu") for n in nodes)
        ]

    def redis_cpu_s() -> float:
        return sum(redis_cpu_each())

    redis_before = redis_cpu_each()
    logs: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    for n in range(workers):
        log = tempfile.NamedTemporaryFile(prefix=f"bench-worker{n}-", suffix=".log", delete=False)
        logs.append(log.name)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "streameval", "worker"],
                env={**base, "STREAMEVAL_DATA_DIR": tempfile.mkdtemp(prefix="bench-faust-")},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    run = WorkerRun()

    def record(r: Record) -> None:
        run.stamps.append(time.perf_counter())
        if on_record is not None:
            on_record(r)

    async def watch() -> None:
        while all(p.poll() is None for p in procs):
            run.rss.append((time.perf_counter(), run.done, [_rss_kb(p.pid) for p in procs]))
            run.cpu.append((run.done, sum(_cpu_s(p.pid) for p in procs)))
            if nodes:
                run.redis_cpu.append((run.done, redis_cpu_s()))
            await asyncio.sleep(0.5)
        raise RuntimeError(f"a worker exited; logs: {', '.join(logs)}")

    async def count_in_redis() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            while True:
                total = 0
                async for key in client.scan_iter(
                    match=f"{prefix}{{*}}:all", count=1000
                ):  # streameval.keyspace
                    if not key.endswith(b"{dl}:all"):
                        total += int(hash_fields(await client.hgetall(key)).get("count", 0))  # packed figures
                run.counted.append((time.perf_counter(), total))
                if total >= count:
                    return
                await asyncio.sleep(1.0)
        finally:
            await client.aclose()

    if progress == "redis":
        reading = asyncio.ensure_future(asyncio.wait_for(count_in_redis(), 3600))
    else:
        reading = asyncio.ensure_future(
            collect(
                bootstrap,
                [topics["results"]],
                until=lambda r: len(r) >= count,
                timeout=1800,
                on_record=record,
                fetch_max_wait_ms=5,
            )  # the reader must not add latency of its own (Tansu holds a waiting fetch)
        )
    watcher = asyncio.ensure_future(watch())
    try:
        if started is not None:
            maybe = started()
            if asyncio.iscoroutine(maybe):
                await maybe
        done, _ = await asyncio.wait([reading, watcher], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # raises if a worker died or reading timed out
    finally:
        reading.cancel()
        watcher.cancel()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        try:
            if nodes:
                run.redis_cpu_nodes_s = [a - b for a, b in zip(redis_cpu_each(), redis_before, strict=True)]
                run.redis_cpu_whole_s = sum(run.redis_cpu_nodes_s)
            if tally:
                run.tally = await _tally(redis_url, prefix)
            if before_cleanup is not None:
                before_cleanup()
        finally:
            _delete_prefix(redis_url, prefix)
            for node in nodes:
                node.close()
    return run


async def _tally(redis_url: str, prefix: str) -> tuple[int, int, int]:
    """(events in the all-time counts summed over every pair, pairs, dead letters) under ``prefix``."""
    from streameval.keyspace import connect
    from streameval.store import ResultStore

    client = connect(redis_url)
    try:
        store = ResultStore(client, prefix=prefix)
        pairs = await store.all_time()
        dead = await store.dead_letter_counts()
        return sum(a.count for a in pairs), len(pairs), sum(dead.values())
    finally:
        await client.aclose()


def _delete_prefix(redis_url: str, prefix: str) -> None:
    if redis_url.startswith(
        ("redis+cluster://", "rediss+cluster://")
    ):  # scans every master, deletes slot by slot
        client: redis.Redis | redis.RedisCluster = redis.RedisCluster.from_url(
            redis_url.replace("+cluster", "", 1)
        )
    else:
        client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=5000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
    finally:
        client.close()


def slope_kb_per_100k(samples: Sequence[tuple[float, int, list[int]]]) -> float:
    """Least-squares slope of RSS (kB, first worker) against results, per 100 k results, second half only
    (the first half includes warm-up: imports, pools, caches filling)."""
    points = [(n, rss[0]) for _, n, rss in samples if n > 0 and rss and rss[0]]
    points = points[len(points) // 2 :]
    if len(points) < 3:
        return float("nan")
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return float("nan") if not var else 100_000 * sum((x - mx) * (y - my) for x, y in points) / var
