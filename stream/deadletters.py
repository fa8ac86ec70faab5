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

from . import _lua
from .envelope import DEFAULT_MAX_DEAD_LETTER_BYTES
from .keyspace import Client, Keys, guard, run_scripts
from .models import DeadLetter, DeadLetterTruncation, format_time

__all__ = ["DEFAULT_MAX_DEAD_LETTER_BYTES", "DeadLetterPolicy", "RawStore", "fit", "raw_key"]

# the event id is at most 256 characters in a valid event, but a dead letter's id comes from bad input
_MAX_ID_CHARS = 256
# the smallest useful head/tail: below this the limit is too small to say anything (settings check it)
_MIN_RAW_BYTES = 64


def raw_key(prefix: str, sha256: str) -> str:
    """The Redis key of a kept event: by content, so the same event sent many times is kept once."""
    return Keys(prefix).dead_letter_raw(sha256)


def _encoded_size(letter: DeadLetter) -> int:
    return len(letter.model_dump_json())


def fit(
    letter: DeadLetter,
    raw: bytes | None,
    *,
    max_bytes: int,
    stored_key: str | None = None,
    stored_until: float | None = None,
) -> DeadLetter:
    """``letter`` if it encodes to at most ``max_bytes``, else a copy with head + tail of ``raw``
    (``None``: the letter's own base64 ``raw``, decoded only then).

    ``stored_key`` / ``stored_until`` (epoch s) say where the whole event is kept, if anywhere.
    Raises ``ValueError`` when even an empty head and tail cannot fit (a limit far too small).
    """
    if letter.event_id is not None and len(letter.event_id) > _MAX_ID_CHARS:
        letter = letter.model_copy(update={"event_id": letter.event_id[: _MAX_ID_CHARS - 1] + "…"})
    if _encoded_size(letter) <= max_bytes:
        return letter
    if raw is None:
        raw = base64.b64decode(letter.raw)
    truncation = DeadLetterTruncation(
        length=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        tail="",
        stored_key=stored_key,
        stored_until=format_time(stored_until) if stored_until is not None else None,
    )
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


class RawStore:
    """Whole events of truncated dead letters, in Redis for ``ttl_s``, at most ``budget_bytes`` in all."""

    def __init__(self, client: Client, *, prefix: str, ttl_s: int, budget_bytes: int) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.budget_bytes = budget_bytes
        self._keep = client.register_script(_lua.DEAD_LETTER_RAW)

    async def keep(self, raw: bytes, sha256: str, *, now: float | None = None) -> tuple[str, float] | None:
        """Keep ``raw``; returns (key, expiry in epoch s), or None when over the budget (not kept)."""
        if len(raw) > self.budget_bytes:
            return None
        now = time.time() if now is None else now
        key = raw_key(self.prefix, sha256)
        keys = [Keys(self.prefix).dead_letter_raw_index, Keys(self.prefix).dead_letter_raw_bytes, key]
        args = [now, self.ttl_s, self.budget_bytes, len(raw), raw, sha256]
        [kept] = await guard(run_scripts(self.client, [(self._keep, keys, args)]))
        return (key, now + self.ttl_s) if int(kept) else None


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """How the stream worker sizes dead letters: ``max_bytes`` encoded, whole events kept in ``store``."""

    max_bytes: int = DEFAULT_MAX_DEAD_LETTER_BYTES
    store: RawStore | None = None

    async def apply(self, letter: DeadLetter, raw: bytes | None = None) -> DeadLetter:
        """``letter`` made to fit; the whole ``raw`` kept in the store when it had to be cut.

        ``raw`` defaults to the letter's own bytes (its base64 ``raw``), decoded only when the letter
        does not fit as it is."""
        fitted = fit(letter, raw, max_bytes=self.max_bytes)
        if fitted.truncated is None or self.store is None:
            return fitted
        if raw is None:
            raw = base64.b64decode(letter.raw)  # a second decode, on the rare path of a letter cut
        kept = await self.store.keep(raw, fitted.truncated.sha256)
        if kept is None:
            return fitted
        return fit(letter, raw, max_bytes=self.max_bytes, stored_key=kept[0], stored_until=kept[1])
