"""Published marks on a real Redis: once the broker acknowledged a batch's results, a redelivery publishes
nothing and the stored copies are gone; before that, the stored copy as always."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from test_store import make_result

from streameval.errors import StoreUnavailable
from streameval.models import GradedResult
from streameval.store import PUBLISHED, Receipt, ResultStore
from streameval.store_published import MAX_PENDING, Pending

NOW = 1795255200 + 31


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str) -> ResultStore:
    return ResultStore(aredis, prefix=prefix, windows=(60, 3600), clock=lambda: NOW)


async def strings(aredis: aioredis.Redis, store: ResultStore, result: GradedResult) -> list[bytes]:
    pair = store.pair_id(result.model, result.suite)
    return [k async for k in aredis.scan_iter(match=store.keys.result_blob(pair, "*"))]


async def test_a_redelivery_after_the_acknowledgement_publishes_nothing_and_the_copy_is_gone(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    results = [await make_result(f"p{i}", "Paris") for i in range(3)]
    receipt = Receipt()
    items = [(r, f"first {r.id}".encode(), None, r.id.encode()) for r in results]
    assert await store.record_many(items, receipt=receipt) == [None] * 3
    [kept] = await strings(aredis, store, results[0])
    # before the acknowledgement: a redelivery publishes the stored copy
    again = [(r, b"fresh", None, r.id.encode()) for r in results]
    redelivered = Receipt()
    assert await store.record_many(again[:1], receipt=redelivered) == [b"first p0"]
    store.published([receipt, redelivered])
    assert await store.flush_published(0) == 1
    assert await strings(aredis, store, results[0]) == []  # the copies are gone
    assert not await aredis.exists(kept)
    assert await store.record_many(again) == [PUBLISHED] * 3
    [aggregate] = await store.all_time()
    assert aggregate.count == 3


async def test_the_marks_ride_along_in_the_pairs_next_record_call(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    first, second = await make_result("r1", "Paris"), await make_result("r2", "London")
    receipt = Receipt()
    assert await store.record_many([(first, b"one", None, b"1")], receipt=receipt) == [None]
    store.published([receipt])
    calls = []
    real = store._record_call

    def spy(*args: object, **kwargs: object) -> object:
        call = real(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(call)
        return call

    store._record_call = spy  # type: ignore[method-assign]
    assert await store.record_many([(second, b"two", None, b"2")]) == [None]
    assert len(calls) == 1 and len(store._pending) == 0  # written with the second batch's own call
    assert await store.flush_published(0) == 0
    assert len(await strings(aredis, store, first)) == 1  # the second batch's copy only
    assert await store.record_many([(first, b"again", None, b"1"), (second, b"again", None, b"2")]) == [
        PUBLISHED,
        b"two",
    ]


async def test_a_reused_id_after_the_mark_is_another_event(store: ResultStore) -> None:
    first = await make_result("reused", "Paris")
    other = first.model_copy(update={"category": "other content, same id"})
    receipt = Receipt()
    assert await store.record_many([(first, b"first", None, b"raw 1")], receipt=receipt) == [None]
    store.published([receipt])
    await store.flush_published(0)
    assert await store.record_many([(other, b"other", None, b"raw 2")]) == [None]  # counted, published
    assert await store.record_many([(other, b"x", None, b"raw 2")]) == [b"other"]  # not marked yet
    assert await store.record_many([(first, b"again", None, b"raw 1")]) == [PUBLISHED]  # its mark holds
    receipt = Receipt()
    await store.record_many([(other, b"x", None, b"raw 2")], receipt=receipt)
    store.published([receipt])
    await store.flush_published(0)
    assert await store.record_many([(other, b"x", None, b"raw 2")]) == [PUBLISHED]
    # the id's published mark names the other event now: the first one's redelivery cannot tell, and
    # publishes its fresh evaluation (never the other event's result)
    assert await store.record_many([(first, b"again", None, b"raw 1")]) == [b"again"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 2


async def test_a_redelivery_in_the_same_batch_as_its_copy_publishes_nothing_once_marked(
    store: ResultStore,
) -> None:
    result = await make_result("twice", "Paris")
    receipt = Receipt()
    assert await store.record_many([(result, b"first", None, b"raw")], receipt=receipt) == [None]
    store.published([receipt])
    item = (result, b"again", None, b"raw")
    assert await store.record_many([item, item]) == [PUBLISHED, PUBLISHED]


async def test_marks_not_written_stay_pending_when_redis_fails(
    store: ResultStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await make_result("down", "Paris")
    receipt = Receipt()
    await store.record_many([(result, b"x", None, b"raw")], receipt=receipt)
    store.published([receipt])

    async def down(*args: object, **kwargs: object) -> list[object]:
        raise ConnectionError("Redis is down")

    monkeypatch.setattr("streameval.store.run_scripts", down)
    with pytest.raises(StoreUnavailable):
        await store.flush_published(0)
    with pytest.raises(StoreUnavailable):
        await store.record_many([(await make_result("other", "Paris"), b"y", None, b"raw 2")])
    assert len(store._pending) == 2  # one mark, one string: given back both times
    monkeypatch.undo()
    assert await store.flush_published(0) == 1
    assert await store.record_many([(result, b"again", None, b"raw")]) == [PUBLISHED]


def test_pending_marks_are_bounded() -> None:
    pending = Pending()
    for i in range(3):
        receipt = Receipt()
        for j in range(MAX_PENDING // 2):
            receipt.add(f"pair{i}", "k", f"id{j}", b"12345678")
        pending.add([receipt])
    assert len(pending) <= MAX_PENDING


async def test_calls_made_together_are_recorded_in_one_call_per_pair_each_with_its_own_copies(
    store: ResultStore, aredis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streameval.store as store_module

    rounds: list[int] = []
    real = store_module.run_scripts

    async def counting(client: object, calls: list[object], **kwargs: object) -> list[object]:
        rounds.append(len(calls))
        return await real(client, calls, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "run_scripts", counting)
    results = [await make_result(f"g{i}", "Paris") for i in range(5)]
    receipts = [Receipt() for _ in results]
    replies = await asyncio.gather(
        *(
            store.record_many([(r, f"copy {r.id}".encode(), None, r.id.encode())], receipt=receipt)
            for r, receipt in zip(results, receipts, strict=True)
        )
    )
    assert replies == [[None]] * 5
    assert rounds == [1, 2]  # the pair cap once; then the index call and one record call for all five
    assert len(await strings(aredis, store, results[0])) == 5  # a copy string per call
    store.published(receipts[:1])  # the broker acknowledged the first call's result only
    await store.flush_published(0)
    again = [(r, b"fresh", None, r.id.encode()) for r in results]
    assert await store.record_many(again) == [PUBLISHED, *(f"copy {r.id}".encode() for r in results[1:])]
    [aggregate] = await store.all_time()
    assert aggregate.count == 5


def test_the_published_script_runs_the_record_scripts_function() -> None:
    from streameval import _lua

    assert _lua.PUBLISHED.startswith(_lua._PUBLISHED_FN)
    assert _lua.record_script().startswith(_lua._PUBLISHED_FN)
