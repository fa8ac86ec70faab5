"""Redis cache of judge answers, and the per-judge tokens-per-minute budget.

Cache key: ``{prefix}judge:{judge}:{model}:v{template version}:{sha256 of the rendered prompt}`` (judge
and model URL-quoted), so a repeated output under the same rubric costs no call, and changing a
judge's model or a template invalidates its entries. The value is the judge's raw answer and token
counts; it is re-parsed on a hit (parsing is deterministic). The cache is best effort: when Redis
fails, the judge is called as if the entry were missing, and the failure is logged once per burst.

Keys carry no hash tag, so on a Redis Cluster they spread over every node; a batch's MGET is split
by slot there (streameval.keyspace.mget). Reads and writes are coalesced: the gets (puts) issued in one turn of the event loop go to Redis as
one ``MGET`` (one non-transactional pipeline of ``SET ... EX``), at most :attr:`JudgeCache.BATCH` keys
a command. A worker starts a whole batch of events at once, so this turns ~6 commands per judged
event into a few per batch (one command per call was ~19 % of a judged worker's CPU at 1,900 calls/s).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from redis import exceptions as redis_errors

from .. import keyspace

__all__ = ["CachedAnswer", "JudgeCache", "TokenBudget"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


class JudgeCache:
    #: most keys in one MGET or one pipeline of SETs
    BATCH = 256

    def __init__(
        self, client: keyspace.Client, *, prefix: str = "streameval:", ttl_s: int = 7 * 86400
    ) -> None:
        self.client = client
        self.prefix = prefix
        self._keys = keyspace.Keys(prefix)
        self.ttl_s = ttl_s
        self._gets: list[tuple[str, asyncio.Future[bytes | None]]] = []
        self._puts: list[tuple[str, bytes, asyncio.Future[None]]] = []
        self._flushes: set[asyncio.Task[None]] = set()  # running flushes (a reference keeps them alive)

    def key(self, judge: str, model: str, version: str, system: str, user: str) -> str:
        digest = hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()
        return self._keys.judge(judge, model, version, digest)

    def _queue(
        self, queue: list[Any], item: tuple[Any, ...], flush: Callable[[list[Any]], Awaitable[None]]
    ) -> None:
        queue.append(item)
        if len(queue) == 1:  # the first of this turn: flush once the turn's other requests are queued
            asyncio.get_running_loop().call_soon(self._start, queue, flush)

    def _start(self, queue: list[Any], flush: Callable[[list[Any]], Awaitable[None]]) -> None:
        batch = queue[:]
        queue.clear()
        task = asyncio.ensure_future(flush(batch))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush_gets(self, batch: list[tuple[str, asyncio.Future[bytes | None]]]) -> None:
        try:
            for i in range(0, len(batch), self.BATCH):
                chunk = batch[i : i + self.BATCH]
                try:
                    values = await keyspace.mget(self.client, [key for key, _ in chunk])
                except redis_errors.RedisError as exc:
                    log.warning("judge cache read failed (%s); calling the judge", type(exc).__name__)
                    values = [None] * len(chunk)
                for (_, future), value in zip(chunk, values, strict=True):
                    if not future.done():
                        future.set_result(value)
        finally:  # cancelled (shutdown) or a bug: the askers call their judges
            for _, future in batch:
                if not future.done():
                    future.set_result(None)

    async def _flush_puts(self, batch: list[tuple[str, bytes, asyncio.Future[None]]]) -> None:
        try:
            for i in range(0, len(batch), self.BATCH):
                chunk = batch[i : i + self.BATCH]
                try:
                    pipe = self.client.pipeline(transaction=False)
                    for key, value, _ in chunk:
                        pipe.set(key, value, ex=self.ttl_s)
                    await pipe.execute()
                except redis_errors.RedisError as exc:
                    log.warning("judge cache write failed (%s)", type(exc).__name__)
                for _, _, future in chunk:
                    if not future.done():
                        future.set_result(None)
        finally:
            for _, _, future in batch:
                if not future.done():
                    future.set_result(None)

    async def get(self, key: str) -> CachedAnswer | None:
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._queue(self._gets, (key, future), self._flush_gets)
        raw = await future
        if raw is None:
            return None
        try:
            doc = orjson.loads(raw)
            return CachedAnswer(str(doc["text"]), int(doc["in"]), int(doc["out"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # an entry from another version of the format: treat as missing

    async def put(self, key: str, answer: CachedAnswer) -> None:
        """Returns once the entry is written (or the write failed, which is logged)."""
        value = orjson.dumps(
            {"text": answer.text, "in": answer.prompt_tokens, "out": answer.completion_tokens}
        )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue(self._puts, (key, value, future), self._flush_puts)
        await future


class TokenBudget:
    """Tokens spent by one judge over the last 60 s, in this process.

    :meth:`exhausted` is checked before a call: once the tokens of the last minute reach the budget,
    calls are skipped (reason ``budget``) until old spending leaves the window. A call in flight can
    overshoot the budget by its own size; the budget is per worker process.
    """

    WINDOW_S = 60.0

    def __init__(self, tokens_per_minute: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = tokens_per_minute
        self.clock = clock
        self._spent: collections.deque[tuple[float, int]] = collections.deque()
        self._total = 0

    def _expire(self) -> None:
        horizon = self.clock() - self.WINDOW_S
        while self._spent and self._spent[0][0] <= horizon:
            self._total -= self._spent.popleft()[1]

    def exhausted(self) -> bool:
        if self.limit is None:
            return False
        self._expire()
        return self._total >= self.limit

    def spend(self, tokens: int) -> None:
        if self.limit is None or tokens <= 0:
            return
        self._spent.append((self.clock(), tokens))
        self._total += tokens

    @property
    def spent(self) -> int:
        self._expire()
        return self._total
