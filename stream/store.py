"""Redis state: idempotency by event id and windowed aggregates, updated in one atomic script.

Keys (``P`` = the configured prefix, ``m``/``s`` = URL-quoted model and suite):

* ``P seen:{id}``                     the stored encoded result (first writer wins; TTL ``seen_ttl_s``)
* ``P agg:{size}:{start}:{m}:{s}``    hash of one tumbling window (TTL ``window_ttl_s``)
* ``P agg:all:{m}:{s}``               hash of all time
* ``P pairs``                         set of ``m s`` pairs seen (for listing)
* ``P dl:seen:{topic}:{part}:{off}``  dead letter already counted (replays do not count twice)
* ``P dl:{size}:{start}`` / ``P dl:all``  dead-letter counts by kind
* ``P wpairs:{size}:{start}``         set of pairs with data in that window
* ``P windows:{size}``                sorted set of window starts with data, not yet published
* ``P closed:{size}:{start}``         the window is closed (published or being published): late events
  go to the open window (streameval.windows)

Aggregate hash fields: ``count sum sumsq passes grade:{g} lat:{bucket} late late_redirected`` for the
suite score, latency histogram and lateness, and
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

import orjson
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from .errors import StoreUnavailable
from .models import GradedResult, parse_time
from .stats import latency_bucket

__all__ = ["PairAggregate", "ResultStore", "retry_forever"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# KEYS[1] seen key, KEYS[2] pairs set, then per window size four keys: the event's window hash, its pair
# set, its closed mark, the size's sorted set of windows with data (score = start); last the all-time hash.
# ARGV: 1 encoded result, 2 seen ttl, 3 window ttl, 4 number of sizes, 5 pair id, 6 now ('' = Redis TIME),
#       7 allowed lateness, 8 key prefix, then per size (size, event window start), last one JSON
#       array [field, increment, field, increment, ...] added to every target hash: each size's window
#       and the all-time hash. One JSON argument rather than one argument per increment per target:
#       packing ~150 arguments per event was 14 % of a worker's CPU (docs/performance.md).
# The watermark is the Redis clock minus the lateness (streameval.windows). An event whose window has
# passed it, or was already closed (published), counts in the window open now, as late_redirected; the
# check and the increments are one script, so an event is either in the hash the closer reads after
# setting the closed mark, or redirected: never lost, never twice. (The open window's keys are built
# here, so this script needs a single Redis node, not a cluster.)
_RECORD = """
local previous = redis.call('GET', KEYS[1])
if previous then return previous end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[5])
local now = tonumber(ARGV[6])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local lateness, prefix, pair = tonumber(ARGV[7]), ARGV[8], ARGV[5]
local sizes = tonumber(ARGV[4])
local target = {}
for i = 1, sizes do
  local k = 2 + (i - 1) * 4
  local size, start = tonumber(ARGV[7 + 2 * i]), tonumber(ARGV[8 + 2 * i])
  local hash, members = KEYS[k + 1], KEYS[k + 2]
  if start + size + lateness <= now or redis.call('EXISTS', KEYS[k + 3]) == 1 then
    start = math.floor(now / size) * size
    hash = prefix .. 'agg:' .. size .. ':' .. string.format('%d', start) .. ':' .. pair
    members = prefix .. 'wpairs:' .. size .. ':' .. string.format('%d', start)
    redis.call('HINCRBY', hash, 'late_redirected', 1)
  elseif start + size <= now then
    redis.call('HINCRBY', hash, 'late', 1)
  end
  target[i] = hash
  redis.call('SADD', members, pair)
  redis.call('ZADD', KEYS[k + 4], start, string.format('%d', start))
  redis.call('EXPIRE', members, ARGV[3])
  redis.call('EXPIRE', KEYS[k + 4], ARGV[3])
end
target[sizes + 1] = KEYS[#KEYS]
local increments = cjson.decode(ARGV[9 + sizes * 2])
for t = 1, sizes + 1 do
  local hash = target[t]
  for i = 1, #increments, 2 do
    redis.call('HINCRBYFLOAT', hash, increments[i], increments[i + 1])
  end
end
for i = 1, sizes do redis.call('EXPIRE', target[i], ARGV[3]) end
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
        allowed_lateness_s: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.windows = tuple(windows)
        self.window_ttl_s = window_ttl_s
        self.seen_ttl_s = seen_ttl_s
        self.allowed_lateness_s = allowed_lateness_s
        self.clock = clock  # tests inject one; None: the Redis server's clock (the watermark's clock)
        self._record = client.register_script(_RECORD)
        self._dead_letter = client.register_script(_DEAD_LETTER)

    # -- keys ---------------------------------------------------------------------------------
    def pair_id(self, model: str, suite: str) -> str:
        """``model:suite``, each URL-quoted: the pair's part of every key and its member in the pair sets."""
        return f"{quote(model, safe='')}:{quote(suite, safe='')}"

    def window_key(self, size: int, start: int, model: str, suite: str) -> str:
        return f"{self.prefix}agg:{size}:{start}:{self.pair_id(model, suite)}"

    def all_time_key(self, model: str, suite: str) -> str:
        return f"{self.prefix}agg:all:{self.pair_id(model, suite)}"

    # -- writes -------------------------------------------------------------------------------
    def window_pairs_key(self, size: int, start: int) -> str:
        return f"{self.prefix}wpairs:{size}:{start}"

    def closed_key(self, size: int, start: int) -> str:
        return f"{self.prefix}closed:{size}:{start}"

    def open_windows_key(self, size: int) -> str:
        return f"{self.prefix}windows:{size}"

    def dead_letter_key(self, size: int, start: int) -> str:
        return f"{self.prefix}dl:{size}:{start}"

    def _record_args(
        self, result: GradedResult, encoded: bytes, counters: dict[str, dict[str, float]] | None
    ) -> tuple[list[str], list[Any]]:
        event_time = parse_time(result.event_time)
        keys = [f"{self.prefix}seen:{result.id}", f"{self.prefix}pairs"]
        windows: list[Any] = []
        for size in self.windows:
            start = int(event_time // size) * size
            keys += [self.window_key(size, start, result.model, result.suite), self.window_pairs_key(size, start),
                     self.closed_key(size, start), self.open_windows_key(size)]  # fmt: skip
            windows += [size, start]
        keys.append(self.all_time_key(result.model, result.suite))
        increments: list[tuple[str, float]] = [
            ("count", 1), ("sum", result.score), ("sumsq", result.score * result.score),
            ("passes", int(result.passed)), (f"grade:{result.grade}", 1),
            (f"lat:{latency_bucket(result.latency_ms)}", 1),
        ]  # fmt: skip
        for ev in result.evaluators:
            base = f"ev:{ev.name}:"
            increments += [
                (base + "count", 1), (base + "sum", ev.score), (base + "sumsq", ev.score * ev.score),
                (base + "passes", int(ev.passed)), (base + "errors", int(ev.error is not None)),
            ]  # fmt: skip
            for counter, value in ((counters or {}).get(ev.name) or {}).items():
                increments.append((f"{base}c:{counter}", value))
        now = "" if self.clock is None else repr(self.clock())
        args: list[Any] = [encoded, self.seen_ttl_s, self.window_ttl_s, len(self.windows),
                           self.pair_id(result.model, result.suite), now, repr(float(self.allowed_lateness_s)),
                           self.prefix, *windows]  # fmt: skip
        flat: list[Any] = []
        for field, value in increments:
            if value:
                flat += [field, float(value)]
        args.append(orjson.dumps(flat))
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
        keys += [self.dead_letter_key(size, int(event_time // size) * size) for size in self.windows]
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


