"""Redis cache of judge answers, and the per-judge tokens-per-minute budget.

Cache key: ``{prefix}judge:{judge}:{model}:v{template version}:{sha256 of the rendered prompt}`` (judge
and model URL-quoted), so a repeated output under the same rubric costs no call, and changing a
judge's model or a template invalidates its entries. The value is the judge's raw answer and token
counts; it is re-parsed on a hit (parsing is deterministic). The cache is best effort: when Redis
fails, the judge is called as if the entry were missing, and the failure is logged once per burst.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import orjson
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

__all__ = ["CachedAnswer", "JudgeCache", "TokenBudget"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


class JudgeCache:
    def __init__(self, client: aioredis.Redis, *, prefix: str = "streameval:", ttl_s: int = 7 * 86400) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s

    def key(self, judge: str, model: str, version: str, system: str, user: str) -> str:
        digest = hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()
        return f"{self.prefix}judge:{quote(judge, safe='')}:{quote(model, safe='')}:v{version}:{digest}"

    async def get(self, key: str) -> CachedAnswer | None:
        try:
            raw = await self.client.get(key)
        except redis_errors.RedisError as exc:
            log.warning("judge cache read failed (%s); calling the judge", type(exc).__name__)
            return None
        if raw is None:
            return None
        try:
            doc = orjson.loads(raw)
            return CachedAnswer(str(doc["text"]), int(doc["in"]), int(doc["out"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # an entry from another version of the format: treat as missing

    async def put(self, key: str, answer: CachedAnswer) -> None:
        value = orjson.dumps({"text": answer.text, "in": answer.prompt_tokens, "out": answer.completion_tokens})
        try:
            await self.client.set(key, value, ex=self.ttl_s)
        except redis_errors.RedisError as exc:
            log.warning("judge cache write failed (%s)", type(exc).__name__)


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
