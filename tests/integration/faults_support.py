"""Helpers of the fault tests (docs/reliability.md): a mixed event stream, a live reader of the output topics
and the exact accounting every fault test ends with.

The accounting reads the output topics to quiescence (end offsets cannot be used on Tansu, see
docs/api.md on consumer lag) and checks: every valid id has a result and all copies of it are byte-identical, every
invalid event has a dead letter, no other output exists, and the Redis all-time aggregates count
each valid event once and each dead letter once. It returns the figures the report quotes.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import redis.asyncio as aioredis
from _support import raw_event, wait_until

from streameval.kafka_io import Record, tail
from streameval.models import parse_time
from streameval.store import hash_fields

from ._topics import settle

__all__ = ["Accounting", "LiveReader", "account", "make_stream", "write_config"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SIMPLE_CONFIG = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}, {evaluator: token_f1}]
"""


def write_config(directory: Path, text: str = SIMPLE_CONFIG) -> Path:
    path = directory / "suites.yaml"
    path.write_text(text)
    return path


def make_stream(valid: int, invalid: int, *, seed: int, run: str) -> tuple[list[bytes], set[str], set[bytes]]:
    """``valid`` small valid events (ids ``{run}-{i}``) with ``invalid`` unique bad ones mixed in.

    Returns (events in order, valid ids, invalid raw bytes).
    """
    rng = random.Random(seed)
    answers = ["Paris", "Lyon", "Rome", "Madrid"]
    events = [
        raw_event(id=f"{run}-{i}", model=f"m{i % 3}", output=rng.choice(answers), expected="Paris")
        for i in range(valid)
    ]
    ids = {f"{run}-{i}" for i in range(valid)}
    kinds = [
        lambda i: b"not json %d" % i,
        lambda i: b'{"id": "bad-%d", "model": "m", "output": 7}' % i,
        lambda i: b'{"id": "bad-%d", "id": "dup", "model": "m", "output": "x"}' % i,
        lambda i: b'{"id": "bad-%d", "model": "m", "output": "x", "metadata": {"v": NaN}}' % i,
    ]
    bad = [kinds[i % len(kinds)](i) for i in range(invalid)]
    for raw in bad:
        events.insert(rng.randrange(len(events) + 1), raw)
    return events, ids, set(bad)


class LiveReader:
    """Tails the results and dead-letter topics in the background; counts what has arrived so far."""

    def __init__(self, bootstrap: str, results: str, deadletter: str) -> None:
        self.bootstrap, self.results, self.deadletter = bootstrap, results, deadletter
        self.records: list[Record] = []
        self.result_ids: set[bytes] = set()
        self.newest_evaluation = 0.0  # the latest evaluated_at (epoch s) seen on a result
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveReader:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        async for record in tail(self.bootstrap, [self.results, self.deadletter]):
            self.records.append(record)
            if record.topic == self.results and record.key:
                self.result_ids.add(record.key)
                evaluated = parse_time(orjson.loads(record.value)["evaluated_at"])
                self.newest_evaluation = max(self.newest_evaluation, evaluated)

    @property
    def dead(self) -> int:
        return sum(1 for r in self.records if r.topic == self.deadletter)

    async def wait(self, done: int, *, timeout: float, what: str) -> float:
        """Wait until ``done`` distinct ids have results (and return the seconds it took)."""
        return await self.wait_for(lambda: len(self.result_ids) >= done, timeout=timeout, what=what)

    async def evaluated_after(self, wall: float, *, timeout: float) -> float:
        """Seconds until a result evaluated after the wall-clock time ``wall`` arrives.

        Re-published copies carry their first evaluation time, so this measures new work.
        """
        return await self.wait_for(
            lambda: self.newest_evaluation > wall, timeout=timeout, what="a fresh result"
        )

    async def wait_for(self, check: Callable[[], bool], *, timeout: float, what: str) -> float:
        """Wait until ``check()`` holds (and return the seconds it took); fails after ``timeout``."""
        start = time.monotonic()

        def ready() -> bool:
            if self._task is not None and self._task.done():
                self._task.result()  # raise the reader's error
            return check()

        await wait_until(ready, timeout=timeout, what=lambda: f"{what} ({len(self.result_ids)} ids so far)")
        return time.monotonic() - start

    async def quiesce(self, *, idle: float = 2.0) -> list[Record]:
        """Everything read once nothing new arrived for ``idle`` s (proves no further copies)."""
        await settle(self.records, idle=idle)
        return list(self.records)


@dataclass
class Accounting:
    results: int = 0
    dead_letters: int = 0
    duplicate_results: int = 0
    duplicate_dead_letters: int = 0
    lost_results: int = 0
    lost_dead_letters: int = 0
    counted: int = 0
    counted_dead: int = 0
    problems: list[str] = field(default_factory=list)


async def account(
    records: list[Record],
    topics: dict[str, str],
    ids: set[str],
    bad: set[bytes],
    client: aioredis.Redis,
    prefix: str,
) -> Accounting:
    """The exact accounting of one fault test run; ``problems`` lists every violation found."""
    out = Accounting()
    copies: dict[bytes, set[bytes]] = {}
    per_id: Counter[bytes] = Counter()
    for record in records:
        if record.topic == topics["results"]:
            out.results += 1
            per_id[record.key or b""] += 1
            copies.setdefault(record.key or b"", set()).add(record.value)
    out.duplicate_results = out.results - len(per_id)
    got = {k.decode() for k in copies}
    out.lost_results = len(ids - got)
    if got - ids:
        out.problems.append(f"results for unknown ids: {sorted(got - ids)[:5]}")
    differing = [k for k, v in copies.items() if len(v) > 1]
    if differing:
        out.problems.append(f"{len(differing)} ids have differing result copies, e.g. {differing[:3]}")
    raws: Counter[bytes] = Counter()
    for record in records:
        if record.topic == topics["deadletter"]:
            out.dead_letters += 1
            raws[base64.b64decode(orjson.loads(record.value)["raw"])] += 1
    out.duplicate_dead_letters = out.dead_letters - len(raws)
    out.lost_dead_letters = len(bad - set(raws))
    if set(raws) - bad:
        out.problems.append(f"{len(set(raws) - bad)} dead letters of valid events")
    async for key in client.scan_iter(match=f"{prefix}{{*}}:all", count=1000):
        if not key.decode().endswith("{dl}:all"):
            out.counted += int(hash_fields(await client.hgetall(key)).get("count", 0))
    out.counted_dead = sum(int(v) for v in (await client.hgetall(f"{prefix}{{dl}}:all")).values())
    if out.lost_results or out.lost_dead_letters:
        out.problems.append(f"lost {out.lost_results} results and {out.lost_dead_letters} dead letters")
    if out.counted != len(ids):
        out.problems.append(f"aggregates count {out.counted} events, expected {len(ids)}")
    if out.counted_dead != len(bad):
        out.problems.append(f"dead-letter counts say {out.counted_dead}, expected {len(bad)}")
    return out
