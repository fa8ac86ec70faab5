"""Dead letters that always fit the broker: truncation and the Redis copy of the whole event.

A dead letter carries the event's raw bytes in base64 (4/3 of the event), so an event near the size
limit would make a dead letter larger than the broker takes (``message.max.bytes``, aiokafka's
``max_request_size``): the one publish that must never fail would fail. :func:`fit` keeps a dead letter
under ``max_bytes`` encoded: above it, ``raw`` keeps the event's head, ``truncated`` its tail, length
and SHA-256, and :class:`RawStore` keeps the whole event in Redis for ``ttl_s`` under a key the dead
letter names, within a total byte budget (a flood of huge bad events cannot fill Redis).

Fetch a kept event with ``streameval dead-letter-raw KEY`` (or ``GET KEY`` in any Redis client).
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from .errors import StoreUnavailable
from .models import DeadLetter, DeadLetterTruncation, format_time

__all__ = ["DEFAULT_MAX_DEAD_LETTER_BYTES", "DeadLetterPolicy", "RawStore", "fit", "raw_key"]

DEFAULT_MAX_DEAD_LETTER_BYTES = 256 * 1024
# the event id is at most 256 characters in a valid event, but a dead letter's id comes from bad input
_MAX_ID_CHARS = 256
# the smallest useful head/tail: below this the limit is too small to say anything (settings check it)
_MIN_RAW_BYTES = 64


def raw_key(prefix: str, sha256: str) -> str:
    """The Redis key of a kept event: by content, so the same event sent many times is kept once."""
    return f"{prefix}dlraw:{sha256}"


def _encoded_size(letter: DeadLetter) -> int:
    return len(letter.model_dump_json())


def fit(letter: DeadLetter, raw: bytes, *, max_bytes: int, stored_key: str | None = None,
        stored_until: float | None = None) -> DeadLetter:  # fmt: skip
    """``letter`` if it encodes to at most ``max_bytes``, else a copy with head + tail of ``raw``.

    ``stored_key`` / ``stored_until`` (epoch s) say where the whole event is kept, if anywhere.
    Raises ``ValueError`` when even an empty head and tail cannot fit (a limit far too small).
    """
    if letter.event_id is not None and len(letter.event_id) > _MAX_ID_CHARS:
        letter = letter.model_copy(update={"event_id": letter.event_id[: _MAX_ID_CHARS - 1] + "…"})
    if _encoded_size(letter) <= max_bytes:
        return letter
    truncation = DeadLetterTruncation(
        length=len(raw), sha256=hashlib.sha256(raw).hexdigest(), tail="", stored_key=stored_key,
        stored_until=format_time(stored_until) if stored_until is not None else None,
    )  # fmt: skip
    bare = letter.model_copy(update={"raw": "", "truncated": truncation})
    room = max_bytes - _encoded_size(bare)  # characters left for the two base64 strings
    keep = (room // 4) * 3  # raw bytes that fit as base64 (4 characters per 3 bytes)
    if keep < _MIN_RAW_BYTES:
        raise ValueError(f"a dead letter cannot fit in {max_bytes} bytes (needs {max_bytes - room + 88})")
    head_n = (keep // 2) // 3 * 3  # whole base64 groups, so the two strings add up to at most `keep`
    tail_n = (keep - head_n) // 3 * 3
    head, tail = raw[:head_n], raw[len(raw) - tail_n :] if tail_n else b""
    return bare.model_copy(
        update={
            "raw": base64.b64encode(head).decode("ascii"),
            "truncated": truncation.model_copy(update={"tail": base64.b64encode(tail).decode("ascii")}),
        }
    )


# Keep one event under its content key with a TTL, within a total budget. KEYS: index (zset of
# "sha:size" by expiry), used bytes counter, the event's key. ARGV: now (s), ttl (s), budget, size,
# bytes, sha. Expired entries are forgotten first, so the counter follows what Redis still holds.
_KEEP = """
local now, ttl, budget, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #old > 0 then
  local freed = 0
  for _, member in ipairs(old) do freed = freed + tonumber(string.match(member, ':(%d+)$')) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('DECRBY', KEYS[2], freed)
end
local member = ARGV[6] .. ':' .. ARGV[4]
if redis.call('EXISTS', KEYS[3]) == 0 then
  local used = tonumber(redis.call('GET', KEYS[2]) or '0')
  if used + size > budget then return 0 end
  redis.call('INCRBY', KEYS[2], size)
end
redis.call('SET', KEYS[3], ARGV[5], 'EX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, member)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return 1
"""


class RawStore:
    """Whole events of truncated dead letters, in Redis for ``ttl_s``, at most ``budget_bytes`` in all."""

    def __init__(self, client: aioredis.Redis, *, prefix: str, ttl_s: int, budget_bytes: int) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.budget_bytes = budget_bytes
        self._keep = client.register_script(_KEEP)

    async def keep(self, raw: bytes, sha256: str, *, now: float | None = None) -> tuple[str, float] | None:
        """Keep ``raw``; returns (key, expiry in epoch s), or None when over the budget (not kept)."""
        if len(raw) > self.budget_bytes:
            return None
        now = time.time() if now is None else now
        key = raw_key(self.prefix, sha256)
        keys = [f"{self.prefix}dlraw-index", f"{self.prefix}dlraw-bytes", key]
        try:
            kept = await self._keep(keys=keys, args=[now, self.ttl_s, self.budget_bytes, len(raw), raw, sha256])
        except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc
        return (key, now + self.ttl_s) if int(kept) else None


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """How the stream worker sizes dead letters: ``max_bytes`` encoded, whole events kept in ``store``."""

    max_bytes: int = DEFAULT_MAX_DEAD_LETTER_BYTES
    store: RawStore | None = None

    async def apply(self, letter: DeadLetter, raw: bytes) -> DeadLetter:
        """``letter`` made to fit; the whole ``raw`` kept in the store when it had to be cut."""
        fitted = fit(letter, raw, max_bytes=self.max_bytes)
        if fitted.truncated is None or self.store is None:
            return fitted
        kept = await self.store.keep(raw, fitted.truncated.sha256)
        if kept is None:
            return fitted
        return fit(letter, raw, max_bytes=self.max_bytes, stored_key=kept[0], stored_until=kept[1])
