"""Redis state: idempotency by event id and windowed aggregates, updated in one atomic script.

Keys (``P`` = the configured prefix, ``m``/``s`` = URL-quoted model and suite):

* ``P seen:{id}``                     the stored encoded result (first writer wins; TTL ``seen_ttl_s``)
* ``P agg:{size}:{start}:{m}:{s}``    hash of one tumbling window (TTL ``window_ttl_s``)
* ``P agg:all:{m}:{s}``               hash of all time
* ``P pairs``                         set of ``m s`` pairs seen (for listing)
* ``P dl:seen:{topic}:{part}:{off}``  dead letter already counted (replays do not count twice)
* ``P dl:{size}:{start}`` / ``P dl:all``  dead-letter counts by kind

Aggregate hash fields: ``count sum sumsq passes grade:{g}`` for the suite score and
``ev:{name}:count|sum|sumsq|passes|errors`` per evaluator, plus ``ev:{name}:c:{counter}`` for the
counters an evaluator reports. Floats use HINCRBYFLOAT; counts read back as integers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, unquote

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from .errors import StoreUnavailable
from .models import GradedResult, parse_time

__all__ = ["PairAggregate", "ResultStore", "retry_forever"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# KEYS[1] seen key, KEYS[2] pairs set, KEYS[3..] aggregate hashes; the first ARGV[4] of those expire.
# ARGV: 1 encoded result, 2 seen ttl, 3 window ttl, 4 number of windowed keys, 5 pair member,
#       6.. triples (key index into KEYS, field, increment).
_RECORD = """
local previous = redis.call('GET', KEYS[1])
if previous then return previous end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[5])
for i = 6, #ARGV, 3 do
  redis.call('HINCRBYFLOAT', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
for i = 3, 2 + tonumber(ARGV[4]) do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
return false
"""

# KEYS[1] dedupe key, KEYS[2..] count hashes (the windowed ones expire); ARGV 1 kind, 2 ttl, 3 windowed n
_DEAD_LETTER = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) == false then return 0 end
for i = 2, #KEYS do redis.call('HINCRBY', KEYS[i], ARGV[1], 1) end
for i = 2, 1 + tonumber(ARGV[3]) do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
return 1
"""

_TRANSIENT = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError)


@dataclass(frozen=True)
class PairAggregate:
    """Figures of one model × suite in one window (or all time)."""

    model: str
    suite: str
    count: int
    mean: float
    pass_rate: float
    fields: dict[str, float]


class ResultStore:
    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "streameval:",
        windows: Sequence[int] = (60,),
        window_ttl_s: int = 7 * 86400,
        seen_ttl_s: int = 7 * 86400,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.windows = tuple(windows)
        self.window_ttl_s = window_ttl_s
        self.seen_ttl_s = seen_ttl_s
        self._record = client.register_script(_RECORD)
        self._dead_letter = client.register_script(_DEAD_LETTER)

    # -- keys ---------------------------------------------------------------------------------
    def _pair(self, model: str, suite: str) -> str:
        return f"{quote(model, safe='')}:{quote(suite, safe='')}"

    def window_key(self, size: int, start: int, model: str, suite: str) -> str:
        return f"{self.prefix}agg:{size}:{start}:{self._pair(model, suite)}"

    def all_time_key(self, model: str, suite: str) -> str:
        return f"{self.prefix}agg:all:{self._pair(model, suite)}"

    # -- writes -------------------------------------------------------------------------------
    def _record_args(
        self, result: GradedResult, encoded: bytes, counters: dict[str, dict[str, float]] | None
    ) -> tuple[list[str], list[Any]]:
        event_time = parse_time(result.event_time)
        keys = [f"{self.prefix}seen:{result.id}", f"{self.prefix}pairs"]
        for size in self.windows:
            keys.append(self.window_key(size, int(event_time // size) * size, result.model, result.suite))
        keys.append(self.all_time_key(result.model, result.suite))
        increments: list[tuple[str, float]] = [
            ("count", 1), ("sum", result.score), ("sumsq", result.score * result.score),
            ("passes", int(result.passed)), (f"grade:{result.grade}", 1),
        ]  # fmt: skip
        for ev in result.evaluators:
            base = f"ev:{ev.name}:"
            increments += [
                (base + "count", 1), (base + "sum", ev.score), (base + "sumsq", ev.score * ev.score),
                (base + "passes", int(ev.passed)), (base + "errors", int(ev.error is not None)),
            ]  # fmt: skip
            for counter, value in ((counters or {}).get(ev.name) or {}).items():
                increments.append((f"{base}c:{counter}", value))
        args: list[Any] = [encoded, self.seen_ttl_s, self.window_ttl_s, len(self.windows), self._pair(result.model, result.suite)]
        for key_index in range(3, len(keys) + 1):
            for field, value in increments:
                if value:
                    args += [key_index, field, repr(float(value))]
        return keys, args

    async def record_many(
        self,
        items: Sequence[tuple[GradedResult, bytes, dict[str, dict[str, float]] | None]],
        dead_letters: Sequence[tuple[str, str, float]] = (),
    ) -> list[bytes | None]:
        """Record a batch in one round trip: one atomic script per result and per dead letter.

        ``items`` are (result, encoded result, counters); ``dead_letters`` are (kind,
        ``topic:partition:offset``, event time), each counted once per source position. Returns, per
        item: ``None`` when it was new (aggregates updated), else the result stored by the first
        writer of that event id (nothing counted; publish that copy instead).
        """
        if not items and not dead_letters:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for result, encoded, counters in items:
                keys, args = self._record_args(result, encoded, counters)
                await self._record(keys=keys, args=args, client=pipe)
            for kind, source_key, event_time in dead_letters:
                keys = self._dead_letter_keys(source_key, event_time)
                await self._dead_letter(keys=keys, args=[kind, self.seen_ttl_s, len(self.windows)], client=pipe)
            replies = await self._guard(pipe.execute)
        return [reply if reply else None for reply in replies[: len(items)]]

    async def record(self, result: GradedResult, encoded: bytes, counters: dict[str, dict[str, float]] | None = None) -> bytes | None:
        return (await self.record_many([(result, encoded, counters)]))[0]

    def _dead_letter_keys(self, source_key: str, event_time: float) -> list[str]:
        keys = [f"{self.prefix}dl:seen:{source_key}"]
        keys += [f"{self.prefix}dl:{size}:{int(event_time // size) * size}" for size in self.windows]
        keys.append(f"{self.prefix}dl:all")
        return keys

    async def record_dead_letter(self, kind: str, source_key: str, event_time: float) -> bool:
        """Count a dead letter once per source position (``topic:partition:offset``); False if seen."""
        keys = self._dead_letter_keys(source_key, event_time)
        reply = await self._guard(
            lambda: self._dead_letter(keys=keys, args=[kind, self.seen_ttl_s, len(self.windows)])
        )
        return bool(reply)

    async def _guard(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except _TRANSIENT as exc:
            raise StoreUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc

    # -- reads --------------------------------------------------------------------------------
    async def pairs(self) -> list[tuple[str, str]]:
        members = await self._guard(lambda: self.client.smembers(f"{self.prefix}pairs"))
        out = []
        for member in members:
            model, suite = (member.decode() if isinstance(member, bytes) else member).split(":", 1)
            out.append((unquote(model), unquote(suite)))
        return sorted(out)

    async def all_time(self) -> list[PairAggregate]:
        pairs = await self.pairs()
        async with self.client.pipeline(transaction=False) as pipe:
            for model, suite in pairs:
                pipe.hgetall(self.all_time_key(model, suite))
            hashes = await self._guard(pipe.execute)
        return [_aggregate(model, suite, raw) for (model, suite), raw in zip(pairs, hashes, strict=True)]

    async def window(self, size: int, start: int, model: str, suite: str) -> PairAggregate:
        raw = await self._guard(lambda: self.client.hgetall(self.window_key(size, start, model, suite)))
        return _aggregate(model, suite, raw)

    async def dead_letter_counts(self) -> dict[str, int]:
        raw = await self._guard(lambda: self.client.hgetall(f"{self.prefix}dl:all"))
        return {_text(k): int(v) for k, v in raw.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _aggregate(model: str, suite: str, raw: dict[Any, Any]) -> PairAggregate:
    fields = {_text(k): float(v) for k, v in raw.items()}
    count = int(fields.get("count", 0))
    mean = fields.get("sum", 0.0) / count if count else 0.0
    pass_rate = fields.get("passes", 0.0) / count if count else 0.0
    return PairAggregate(model, suite, count, mean, pass_rate, fields)


async def retry_forever(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    first_delay: float = 0.1,
    max_delay: float = 5.0,
) -> T:
    """Run ``call`` until it stops raising :class:`StoreUnavailable`, with capped exponential backoff.

    The worker uses this around Redis so that an outage stalls the stream (offsets are not committed
    past unrecorded events) instead of losing or double-counting anything.
    """
    delay = first_delay
    failures = 0
    while True:
        try:
            return await call()
        except StoreUnavailable as exc:
            failures += 1
            log.warning("%s failed (%d in a row), retrying in %.1fs: %s", what, failures, delay, exc)
            await asyncio.sleep(delay)
            delay = min(max_delay, delay * 2)


