"""The Redis store on a real Redis server: idempotency, exact aggregates, outages."""

from __future__ import annotations

import asyncio
import statistics

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from streameval.config import parse_config
from streameval.errors import StoreUnavailable
from streameval.keyspace import OVERFLOW_MODEL
from streameval.migrate import migrate_marks
from streameval.models import GradedResult
from streameval.pipeline import Pipeline
from streameval.store import ResultStore, hash_fields, retry_forever

SUITES = {
    "suites": [
        {
            "name": "qa",
            "default": True,
            "evaluators": [{"evaluator": "exact_match"}, {"evaluator": "similarity", "weight": 2}],
        }
    ]
}


async def make_result(
    event_id: str, output: str, *, model: str = "gpt:4/o", ts: str = "2026-11-21T10:00:30Z"
) -> GradedResult:
    _, suites = parse_config(SUITES)
    raw = f'{{"id": "{event_id}", "model": "{model}", "output": "{output}", "expected": "Paris", "timestamp": "{ts}"}}'
    outcome = await Pipeline(suites).process(raw.encode())
    assert outcome.result is not None
    # the pre-versioning layout (two-part pairs): these tests are about the record path's mechanics;
    # per-version figures are tested in tests/versions/
    return outcome.result.model_copy(update={"suite_version": None})


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str) -> ResultStore:
    # "now" is just after the events' time, so their windows are open (tests/core/test_windows.py covers lateness)
    return ResultStore(aredis, prefix=prefix, windows=(60, 3600), clock=lambda: 1795255200 + 31)


async def test_aggregates_are_exact(store: ResultStore) -> None:
    outputs = ["Paris", "paris", "Pariss", "London", "Paris"]
    results = [await make_result(f"e{i}", o) for i, o in enumerate(outputs)]
    replies = await store.record_many([(r, r.model_dump_json().encode(), None) for r in results])
    assert replies == [None] * len(results)
    [aggregate] = await store.all_time()
    scores = [r.score for r in results]
    assert (aggregate.model, aggregate.suite, aggregate.count) == ("gpt:4/o", "qa", 5)
    assert aggregate.mean == pytest.approx(statistics.fmean(scores), abs=1e-12)
    assert aggregate.fields["sumsq"] == pytest.approx(sum(s * s for s in scores), abs=1e-12)
    assert aggregate.pass_rate == sum(r.passed for r in results) / 5
    assert aggregate.fields["ev:exact_match:passes"] == 2
    assert aggregate.fields["ev:similarity:count"] == 5
    # the event's own time picks the window: 10:00:30 is in [10:00, 10:01) and [10:00, 11:00)
    start = 1795255200  # 2026-11-21T10:00:00Z
    minute = await store.window(60, start, "gpt:4/o", "qa")
    hour = await store.window(3600, start, "gpt:4/o", "qa")
    assert minute.count == hour.count == 5
    assert (await store.window(60, start + 60, "gpt:4/o", "qa")).count == 0


async def test_a_redelivered_event_returns_the_first_result_and_counts_once(store: ResultStore) -> None:
    first = await make_result("dup", "Paris")
    again = await make_result(
        "dup", "Paris"
    )  # the same message, evaluated again (e.g. a judge changed its mind)
    assert await store.record_many([(first, b"first", None, b"raw")]) == [None]
    assert await store.record_many([(again, b"second", None, b"raw")]) == [b"first"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 1 and aggregate.mean == first.score


async def test_the_same_id_with_other_content_is_its_own_event(store: ResultStore) -> None:
    # another producer (or a corrected message) reusing an id never gets the first event's result
    paris, london = await make_result("same", "Paris"), await make_result("same", "London")
    assert await store.record_many([(paris, b"paris", None, b"raw paris")]) == [None]
    assert await store.record_many([(london, b"london", None, b"raw london")]) == [None]
    assert await store.record_many([(london, b"again", None, b"raw london")]) == [b"london"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 2 and aggregate.mean == pytest.approx((paris.score + london.score) / 2)
    # the same id under another model is another pair altogether
    other = await make_result("same", "Paris", model="other")
    assert await store.record_many([(other, b"other", None, b"raw paris")]) == [None]


async def test_a_partly_redelivered_batch_counts_only_the_new_events(store: ResultStore) -> None:
    results = [
        await make_result(f"p{i}", o) for i, o in enumerate(["Paris", "Rome", "paris", "London", "Paris"])
    ]
    items = [(r, r.id.encode(), None, r.id.encode()) for r in results]
    assert await store.record_many(items[:2]) == [None, None]
    replies = await store.record_many([items[3], items[0], items[2], items[1], items[4]])
    assert replies == [None, b"p0", None, b"p1", None]
    [aggregate] = await store.all_time()
    assert aggregate.count == 5 and aggregate.fields["sum"] == pytest.approx(sum(r.score for r in results))
    assert (await store.window(60, 1795255200, "gpt:4/o", "qa")).count == 5


async def test_a_replay_after_the_redelivery_horizon_publishes_the_fresh_result_and_counts_nothing(
    aredis: aioredis.Redis, prefix: str
) -> None:
    now = [1795255200 + 31.0]
    store = ResultStore(aredis, prefix=prefix, windows=(60,), redelivery_ttl_s=3600, clock=lambda: now[0])
    result = await make_result("old", "Paris")
    assert await store.record_many([(result, b"first", None, b"raw")]) == [None]
    now[0] += 2 * 3600  # two redelivery generations later: the results have expired (simulated)
    pair = store.pair_id(result.model, result.suite)
    kept = [k async for k in aredis.scan_iter(match=store.keys.result_blob(pair, "*"))]
    assert len(kept) == 1
    await aredis.delete(store.keys.result_ids(pair, int((now[0] - 7200) // 3600)), *kept)
    assert await store.record_many([(result, b"fresh", None, b"raw")]) == [b"fresh"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 1


async def test_an_id_reused_by_another_event_never_republishes_that_events_result(store: ResultStore) -> None:
    first = await make_result("reused", "Paris")
    other = first.model_copy(update={"category": "other content, same id"})
    assert await store.record_many([(first, b"first", None, b"raw 1")]) == [None]
    assert await store.record_many([(other, b"other", None, b"raw 2")]) == [
        None
    ]  # a different event: counted
    # the id's pointer now names the other event: a redelivery of the first publishes its fresh evaluation
    assert await store.record_many([(first, b"again", None, b"raw 1")]) == [b"again"]
    assert await store.record_many([(other, b"x", None, b"raw 2")]) == [b"other"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 2


async def test_results_kept_by_the_previous_version_are_published_again(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    # the previous version kept the encoded result by digest (res:{gen}) and the id's digest (rid:{gen})
    result = await make_result("upgrade", "Paris")
    assert await store.record_many([(result, b"new layout", None, b"raw")]) == [None]
    pair, gen = store.pair_id(result.model, result.suite), int(store.now() // store.redelivery_ttl_s)
    digest = store._prepare(0, (result, b"", None, b"raw")).digest
    await aredis.delete(*[k async for k in aredis.scan_iter(match=store.keys.result_blob(pair, "*"))])
    await aredis.hset(store.keys.result_ids(pair, gen), result.id, digest)
    await aredis.hset(store.keys.results(pair, gen), digest, b"kept by the previous version")
    assert await store.record_many([(result, b"fresh", None, b"raw")]) == [b"kept by the previous version"]


async def test_marks_and_pointers_are_hash_tables_from_the_first_call(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    # a listpack is searched linearly on every lookup: at a few hundred fields that was most of a call's cost
    result = await make_result("table", "Paris")
    await store.record_many([(result, b"x", None, b"raw")])
    pair = store.pair_id(result.model, result.suite)
    marks = store.keys.marks(pair, int(store.now() // store.seen_ttl_s))
    pointers = store.keys.result_ids(pair, int(store.now() // store.redelivery_ttl_s))
    for key in (marks, pointers):
        assert await aredis.object("encoding", key) == b"hashtable", key


async def test_concurrent_duplicates_count_once(store: ResultStore) -> None:
    result = await make_result("race", "Paris")
    replies = await asyncio.gather(*(store.record(result, f"copy{i}".encode()) for i in range(20)))
    winners = [r for r in replies if r is None]
    assert len(winners) == 1
    assert len({r for r in replies if r is not None}) == 1  # every loser sees the same stored copy
    [aggregate] = await store.all_time()
    assert aggregate.count == 1


async def test_counters_accumulate(store: ResultStore) -> None:
    for i in range(3):
        result = await make_result(f"c{i}", "Paris")
        await store.record(result, b"x", {"exact_match": {"tp": 1, "fn": 0.5}})
    [aggregate] = await store.all_time()
    assert aggregate.fields["ev:exact_match:c:tp"] == 3
    assert aggregate.fields["ev:exact_match:c:fn"] == 1.5


async def test_dead_letters_count_once_per_source_position(store: ResultStore) -> None:
    assert await store.record_dead_letter("schema", "topic:0:10", 0.0)
    assert not await store.record_dead_letter("schema", "topic:0:10", 0.0)  # replay of the same offset
    assert await store.record_dead_letter("invalid_json", "topic:1:10", 0.0)
    assert await store.dead_letter_counts() == {"schema": 1, "invalid_json": 1}


async def test_every_key_the_store_writes_expires(
    store: ResultStore, aredis: aioredis.Redis, prefix: str
) -> None:
    result = await make_result("ttl", "Paris")
    await store.record_many([(result, b"x", None, b"raw")], [("schema", "topic:0:1", 1795255200.0)])
    keys = [k.decode() async for k in aredis.scan_iter(match=f"{prefix}*")]
    assert len(keys) > 8
    ttls = {k: await aredis.ttl(k) for k in keys}
    assert all(ttl > 0 for ttl in ttls.values()), ttls
    start = 1795255200
    assert 0 < ttls[store.window_key(60, start, result.model, result.suite)] <= store.window_ttl_s
    assert 0 < ttls[store.all_time_key(result.model, result.suite)] <= store.all_time_ttl_s
    pair, generation = store.pair_id(result.model, result.suite), (1795255200 + 31) // 3600
    [results] = [k for k in keys if k.startswith(store.keys.result_blob(pair, f"{generation}:"))]
    for key in (results, store.keys.result_ids(pair, generation)):
        assert 0 < ttls[key] <= 2 * 3600  # kept for the redelivery horizon (at most twice it)


async def test_pairs_beyond_the_cap_aggregate_under_the_overflow_model(
    aredis: aioredis.Redis, prefix: str
) -> None:
    from streameval import telemetry

    before = telemetry.AGGREGATE_OVERFLOW.labels("qa")._value.get()
    store = ResultStore(aredis, prefix=prefix, windows=(60,), max_pairs=2, clock=lambda: 1795255200 + 31)
    results = [await make_result(f"m{i}", "Paris", model=f"model-{i}") for i in range(4)]
    replies = await store.record_many([(r, r.id.encode(), None) for r in results])
    assert replies == [None] * 4  # every event still gets its result
    counts = {(a.model, a.suite): a.count for a in await store.all_time()}
    assert counts == {("model-0", "qa"): 1, ("model-1", "qa"): 1, (OVERFLOW_MODEL, "qa"): 2}
    assert telemetry.AGGREGATE_OVERFLOW.labels("qa")._value.get() - before == 2
    again = ResultStore(aredis, prefix=prefix, windows=(60,), max_pairs=2, clock=lambda: 1795255200 + 31)
    assert await again.record_many([(results[3], b"x", None)]) == [b"m3"]  # another worker: still idempotent


async def test_agent_domains_beyond_the_cap_fold_into_other(
    store: ResultStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streameval import store_entries

    monkeypatch.setattr(store_entries, "MAX_COUNTER_LABELS", 2)
    for i in range(4):
        result = await make_result(f"d{i}", "Paris")
        await store.record(result, b"x", {"exact_match": {f"domain:d{i}:sum": 1.0, f"domain:d{i}:n": 1.0}})
    [aggregate] = await store.all_time()
    domains = {f.split(":")[4] for f in aggregate.fields if f.startswith("ev:exact_match:c:domain:")}
    assert domains == {"d0", "d1", "_other"}
    assert aggregate.fields["ev:exact_match:c:domain:_other:n"] == 2


async def test_unreachable_redis_raises_store_unavailable(prefix: str) -> None:
    # no client-side retries (redis-py retries by default): the store must report the outage itself
    client = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    store = ResultStore(client, prefix=prefix)
    with pytest.raises(StoreUnavailable, match="Redis unavailable"):
        await store.record(await make_result("x", "Paris"), b"x")
    await client.aclose()


async def test_retry_forever_waits_out_an_outage() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 4:
            raise StoreUnavailable("down")
        return "ok"

    assert await retry_forever(flaky, what="test", first_delay=0.001, max_delay=0.004) == "ok"
    assert calls == 4


@pytest.mark.parametrize("size", [1, 2, 3, 60])
async def test_late_events_reach_the_open_window_on_the_redis_clock(
    aredis: aioredis.Redis, prefix: str, size: int
) -> None:
    # no injected clock: the store guesses the Redis clock and the script checks the guess
    store = ResultStore(aredis, prefix=prefix, windows=(size,), allowed_lateness_s=0)
    store._offset = -0.9 * min(2.0, size / 2)  # our clock a little behind Redis's
    result = await make_result("late", "Paris", ts="2020-01-01T00:00:00Z")
    assert await store.record(result, b"x") is None
    [aggregate] = await store.all_time()
    assert aggregate.count == 1
    pattern = store.keys.window(store.pair_id(result.model, result.suite), size, 0).removesuffix(":0") + "*"
    [window] = [k async for k in aredis.scan_iter(match=pattern.replace("{", "[{]").replace("}", "[}]"))]
    figures = hash_fields(await aredis.hgetall(window))
    assert figures["late_redirected"] == 1 and figures["count"] == 1


async def test_a_batch_of_thousands_for_one_pair_records_in_one_call(store: ResultStore) -> None:
    base = await make_result("big", "Paris")
    results = [
        base.model_copy(update={"id": f"big-{i}"}) for i in range(5000)
    ]  # 10,000 HSET arguments: over what Lua can unpack at once
    assert await store.record_many([(r, r.id.encode(), None) for r in results]) == [None] * 5000
    assert await store.record_many([(results[-1], b"again", None)]) == [b"big-4999"]
    [aggregate] = await store.all_time()
    assert aggregate.count == 5000


async def test_the_same_event_twice_in_one_batch_counts_once_and_publishes_one_result(
    store: ResultStore,
) -> None:
    first, copy = await make_result("twice", "Paris"), await make_result("twice", "Paris")
    replies = await store.record_many([(first, b"first", None, b"raw"), (copy, b"copy", None, b"raw")])
    assert replies == [None, b"first"]  # the copy publishes what the first one does
    [aggregate] = await store.all_time()
    assert aggregate.count == 1


async def test_figures_packed_by_the_script_read_back_exactly(aredis: aioredis.Redis, prefix: str) -> None:
    """Redis's cmsgpack output for every number and name size the aggregates can hold."""
    names = ["count", "x" * 40, "y" * 300, "ev:" + "z" * 70_000]
    values = [
        0,
        1,
        127,
        128,
        255,
        65_535,
        65_536,
        2**33,
        -1,
        -33,
        -200,
        -40_000,
        -(2**40),
        0.5,
        0.1,
        1e300,
        -2.5e-8,
    ]
    table = ", ".join(f"['{n[:12]}{i}'] = {v!r}" for i, v in enumerate(values) for n in names[:1])
    packed = await aredis.eval(f"return cmsgpack.pack({{{table}}})", 0)
    assert hash_fields({b"~": packed}) == {f"count{i}": float(v) for i, v in enumerate(values)}
    for name in names:  # fixstr, str8/raw16 and raw32 names
        packed = await aredis.eval("local t = {} t[ARGV[1]] = 3 return cmsgpack.pack(t)", 0, name)
        assert hash_fields({"~": packed}) == {name: 3.0}
    with pytest.raises(ValueError):
        hash_fields({b"~": packed[:-1]})


async def test_a_hash_with_fields_of_its_own_keeps_counting(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    """Fields written before the figures were packed still count, and new events add to them."""
    result = await make_result("old", "Paris")
    key = store.all_time_key(result.model, result.suite)
    await aredis.hset(key, mapping={"count": 2, "sum": 1.5, "passes": 1})
    assert await store.record(result, b"x") is None
    [aggregate] = await store.all_time()
    assert aggregate.count == 3 and aggregate.fields["sum"] == pytest.approx(1.5 + result.score)


async def test_the_all_time_ttl_is_renewed_by_writes_at_most_hourly(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    first = await make_result("renew-1", "Paris")
    assert await store.record(first, b"x") is None
    key = store.all_time_key(first.model, first.suite)
    assert store.all_time_ttl_s - 5 <= await aredis.ttl(key) <= store.all_time_ttl_s
    await aredis.expire(key, 1000)
    assert await store.record(await make_result("renew-2", "Paris"), b"x") is None
    assert await aredis.ttl(key) <= 1000  # renewed by this worker within the hour: not sent again
    store._renewed = {p: t - 3601 for p, t in store._renewed.items()}  # an hour later
    assert await store.record(await make_result("renew-3", "Paris"), b"x") is None
    assert await aredis.ttl(key) > store.all_time_ttl_s - 5
    [aggregate] = await store.all_time()
    assert aggregate.count == 3


async def test_waiting_for_replicas_a_server_lacks_is_an_outage(aredis: aioredis.Redis, prefix: str) -> None:
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(60,),
        clock=lambda: 1795255200 + 31,
        wait_replicas=1,
        wait_timeout_ms=50,
    )
    with pytest.raises(StoreUnavailable, match="only 0 of STREAMEVAL_REDIS_WAIT_REPLICAS=1"):
        await store.record(await make_result("wait", "Paris"), b"x")
    store.wait_replicas = 0
    assert await store.record(await make_result("wait", "Paris"), b"y") == b"x"  # counted once, before


async def _mark_as_before(store: ResultStore, aredis: aioredis.Redis, item: tuple, generation: int) -> None:
    """What a worker of the previous layout wrote for a counted event: its digest in a shard hash
    ``mk:{gen}:{shard}`` (shard: first 2 digest bytes mod 64), and its encoded result."""
    event = store._prepare(0, item)
    shard = int.from_bytes(event.digest[:2], "big") % 64
    await aredis.hset(store.keys.legacy_marks(event.pair, generation, shard), event.digest, b"")
    await aredis.hset(
        store.keys.results(event.pair, int(store.now() // store.redelivery_ttl_s)), event.digest, item[1]
    )


async def test_events_marked_by_the_previous_layout_are_not_counted_again_once_migrated(
    store: ResultStore, aredis: aioredis.Redis
) -> None:
    # an upgrade: events counted by a worker of the previous version, redelivered to this one
    generation = int(store.now() // store.seen_ttl_s)
    old = [
        (await make_result(f"old-{i}", "Paris"), f"stored-{i}".encode(), None, f"raw {i}".encode())
        for i in range(40)
    ]
    for i, item in enumerate(old):
        await _mark_as_before(store, aredis, item, generation - (i % 2))  # this generation and the last one
    pair = store.pair_id(old[0][0].model, old[0][0].suite)
    await aredis.zadd(store.keys.pairs, {pair: store.now()})  # the pairs the previous version saw
    assert await migrate_marks(aredis, store.keys, seen_ttl_s=store.seen_ttl_s, now=store.now()) == 40
    assert await migrate_marks(aredis, store.keys, seen_ttl_s=store.seen_ttl_s, now=store.now()) == 0
    assert not await aredis.exists(
        *(store.keys.legacy_marks(pair, g, s) for g in (generation, generation - 1) for s in range(64))
    )
    new = [
        (await make_result(f"new-{i}", "London"), f"new-{i}".encode(), None, f"raw new {i}".encode())
        for i in range(3)
    ]
    again = [(r, b"again", c, raw) for r, _, c, raw in old]
    replies = await store.record_many([*again, *new])
    assert replies == [item[1] for item in old] + [None] * 3  # the first results, published again
    [aggregate] = await store.all_time()
    assert aggregate.count == 3  # the old events counted 0 times here
    for key in (store.keys.marks(pair, g) for g in (generation, generation - 1)):
        assert await aredis.ttl(key) > 0
