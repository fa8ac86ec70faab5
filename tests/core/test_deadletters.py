"""Dead letters always fit: head + tail + SHA-256 above the limit, the whole event kept in Redis."""

from __future__ import annotations

import base64
import hashlib

import orjson
import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from streameval import schemas
from streameval.deadletters import DeadLetterPolicy, RawStore, fit, raw_key
from streameval.models import DeadLetter, DeadLetterSource

VALIDATOR = Draft202012Validator(schemas.load("deadletter"))


def letter_for(raw: bytes, event_id: str | None = None) -> DeadLetter:
    return DeadLetter(
        raw=base64.b64encode(raw).decode("ascii"),
        reason="event is too large",
        kind="too_large",
        event_id=event_id,
        source=DeadLetterSource(topic="evals.requests", partition=1, offset=42),
        failed_at="2026-11-23T10:00:00Z",
        pipeline_version="test",
    )


def check_contract(letter: DeadLetter) -> dict[str, object]:
    encoded = letter.model_dump_json()
    document = orjson.loads(encoded)
    VALIDATOR.validate(document)
    assert DeadLetter.model_validate_json(encoded) == letter
    return document


def test_small_dead_letter_is_unchanged() -> None:
    letter = letter_for(b'{"model": "m"}')
    assert fit(letter, b'{"model": "m"}', max_bytes=4096) is letter


def test_the_issue_event_fits_with_head_tail_and_hash() -> None:
    raw = b'{"model":"m","output":"' + b"A" * 800_000 + b'"}'  # base64 alone is 1,067,052 bytes
    fitted = fit(letter_for(raw), raw, max_bytes=262_144)
    document = check_contract(fitted)
    assert len(fitted.model_dump_json()) <= 262_144
    assert fitted.truncated is not None
    assert (fitted.truncated.length, fitted.truncated.sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    head, tail = base64.b64decode(fitted.raw), base64.b64decode(fitted.truncated.tail)
    assert raw.startswith(head) and raw.endswith(tail) and len(head) > 90_000 and len(tail) > 90_000
    assert document["truncated"]["stored_key"] is None  # nothing kept: fit alone stores nothing


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 300_000), max_bytes=st.integers(4096, 200_000), long_id=st.booleans())
def test_every_dead_letter_fits(size: int, max_bytes: int, long_id: bool) -> None:
    raw = bytes(i % 251 for i in range(size))
    fitted = fit(letter_for(raw, "x" * 5000 if long_id else "e1"), raw, max_bytes=max_bytes)
    assert len(fitted.model_dump_json()) <= max_bytes
    if fitted.truncated is None:
        assert base64.b64decode(fitted.raw) == raw
    else:
        assert raw.startswith(base64.b64decode(fitted.raw)) and raw.endswith(
            base64.b64decode(fitted.truncated.tail)
        )


async def test_store_keeps_the_whole_event_with_a_ttl(aredis: aioredis.Redis, prefix: str) -> None:
    raw = b"x" * 50_000 + b"end"
    policy = DeadLetterPolicy(
        max_bytes=8192, store=RawStore(aredis, prefix=prefix, ttl_s=600, budget_bytes=1 << 20)
    )
    letter = await policy.apply(letter_for(raw), raw)
    check_contract(letter)
    assert letter.truncated is not None and letter.truncated.stored_key == raw_key(
        prefix, letter.truncated.sha256
    )
    assert letter.truncated.stored_until is not None
    assert await aredis.get(letter.truncated.stored_key) == raw
    assert 590 <= await aredis.ttl(letter.truncated.stored_key) <= 600


async def test_store_budget_bounds_redis(aredis: aioredis.Redis, prefix: str) -> None:
    store = RawStore(aredis, prefix=prefix, ttl_s=600, budget_bytes=25_000)
    first, second, third = b"a" * 10_000, b"b" * 10_000, b"c" * 10_000
    assert await store.keep(first, hashlib.sha256(first).hexdigest()) is not None
    assert await store.keep(second, hashlib.sha256(second).hexdigest()) is not None
    assert await store.keep(first, hashlib.sha256(first).hexdigest()) is not None  # same content: kept once
    assert await store.keep(third, hashlib.sha256(third).hexdigest()) is None  # over the budget: not kept
    assert int(await aredis.get(f"{prefix}{{dlraw}}:bytes")) == 20_000
    assert await store.keep(b"d" * 30_000, "d" * 64) is None  # larger than the whole budget
    # once the first two have expired (as seen by the script's clock), their bytes are free again
    later = await store.keep(third, hashlib.sha256(third).hexdigest(), now=9e9)
    assert later is not None
    assert int(await aredis.get(f"{prefix}{{dlraw}}:bytes")) == 10_000


async def test_over_budget_dead_letter_says_nothing_kept(aredis: aioredis.Redis, prefix: str) -> None:
    raw = b"z" * 40_000
    policy = DeadLetterPolicy(
        max_bytes=8192, store=RawStore(aredis, prefix=prefix, ttl_s=600, budget_bytes=1000)
    )
    letter = await policy.apply(letter_for(raw), raw)
    assert letter.truncated is not None and letter.truncated.stored_key is None
    assert letter.truncated.stored_until is None
    check_contract(letter)


def test_limit_too_small_is_refused() -> None:
    raw = b"q" * 10_000
    with pytest.raises(ValueError, match="cannot fit"):
        fit(letter_for(raw), raw, max_bytes=300)


async def test_a_letter_that_fits_is_not_decoded_and_one_cut_uses_its_own_bytes(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streameval.deadletters as module

    policy = DeadLetterPolicy(
        max_bytes=8192, store=RawStore(aredis, prefix=prefix, ttl_s=600, budget_bytes=1 << 20)
    )
    decoded: list[str] = []
    real = base64.b64decode

    def counting(data: str) -> bytes:
        decoded.append(data)
        return real(data)

    monkeypatch.setattr(module.base64, "b64decode", counting)
    small = letter_for(b"not json")
    assert await policy.apply(small) == small
    assert decoded == []  # the worker's common case: no decode of the raw bytes at all
    raw = b"y" * 50_000 + b"tail"
    cut = await policy.apply(letter_for(raw))  # no raw given: the letter's own base64 is decoded
    assert decoded
    given = await policy.apply(letter_for(raw), raw)
    assert cut.truncated is not None and given.truncated is not None
    assert (cut.raw, cut.truncated.tail, cut.truncated.sha256) == (
        given.raw,
        given.truncated.tail,
        given.truncated.sha256,
    )
    assert await aredis.get(cut.truncated.stored_key or "") == raw
