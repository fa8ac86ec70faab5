"""The review page's queue on the real Redis (unique prefix per test): kept items, reservations with a
lease, never the same item twice to one annotator, reviewers per item, progress, and the export's lines."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _feedback_helpers import result
from lua_keys import declared_only
from redis.exceptions import ResponseError

from streameval.features.review import ReviewConfig, ReviewQueue
from streameval.features.review_page import ReviewPageStore, export_lines, form_of, item_key
from streameval.features.review_page._items import MAX_EVENT_BYTES, TEXT_CHARS, item_document
from streameval.keyspace import Keys
from streameval.models import GradedResult, ReviewItem

NOW = 1795255231.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def event(event_id: str, output: str = "北京", expected: str = "北京") -> bytes:
    return orjson.dumps(
        {"id": event_id, "model": "m", "input": "capital?", "output": output, "expected": expected}
    )


async def choose(
    aredis: aioredis.Redis, prefix: str, config: ReviewConfig, ids: list[str], clock: Clock, **kw: Any
) -> tuple[ReviewPageStore, list[ReviewItem]]:
    """Items chosen by the real review queue (judges disagree), kept by the page's store."""
    store = ReviewPageStore(aredis, prefix, config, clock=clock)
    keys = Keys(prefix)
    queue = ReviewQueue(aredis, keys, config, keeper=store)
    fresh: list[tuple[str, GradedResult, bytes | None]] = [
        (
            keys.pair_id(kw.get("model", "m"), "qa"),
            result(i, {"alpha": 9.0, "beta": 1.0, "gamma": 5.0}, **kw),
            event(i),
        )
        for i in ids
    ]
    items = await queue.select(fresh, clock())
    assert len(items) == len(ids)
    assert queue.keeper is not None
    await queue.keeper.keep(items, fresh)
    return store, items


CONFIG = ReviewConfig(rate_per_min=1000, control_rate=0.0, lease_s=60.0)


async def test_kept_items_list_newest_first_with_their_document(aredis: aioredis.Redis, prefix: str) -> None:
    clock = Clock()
    store, _ = await choose(aredis, prefix, CONFIG, ["a", "b"], clock)
    clock.now += 1
    await choose(aredis, prefix, CONFIG, ["c"], clock)
    listed = await store.summaries()
    assert listed[0].fields["id"] == "c" and {s.fields["id"] for s in listed} == {"a", "b", "c"}
    assert listed[0].reasons == ["judges_disagree"] and listed[0].need == 1 and listed[0].done == 0
    doc = await store.document(item_key("m", "qa", "c"))
    assert doc is not None
    assert doc["event"]["expected"] == "北京" and doc["result"]["judge"]["judges"][1]["score"] == 1.0
    assert doc["item"]["reason"].startswith("judges disagree") and doc["form"]["scale"] == "0-10"
    # keeping the same item again changes nothing (its labels stay)
    store2, _ = await choose(aredis, prefix, CONFIG, ["c"], Clock(NOW + 120))
    assert len(await store2.summaries()) == 3


async def test_the_count_and_the_ttl_bound_what_is_kept(aredis: aioredis.Redis, prefix: str) -> None:
    config = CONFIG.model_copy(update={"keep": 3, "keep_ttl_s": 3600})
    clock = Clock()
    store, _ = await choose(aredis, prefix, config, ["a"], clock)
    await store.reserve(item_key("m", "qa", "a"), "ana")
    for i, name in enumerate(["b", "c", "d"], 1):
        clock.now = NOW + i
        await choose(aredis, prefix, config, [name], clock)
    assert sorted(s.fields["id"] for s in await store.summaries()) == ["b", "c", "d"]
    gone = item_key("m", "qa", "a")
    assert await aredis.exists(*(f"{prefix}{{rp}}:{k}:{gone}" for k in ("doc", "m", "r", "f"))) == 0
    clock.now = NOW + 3600 + 2.5  # b and c are older than the TTL now
    await choose(aredis, prefix, config, ["e"], clock)
    assert sorted(s.fields["id"] for s in await store.summaries()) == ["d", "e"]
    assert 0 < await aredis.ttl(f"{prefix}{{rp}}:idx") <= 3600


async def test_a_reserved_item_is_nobody_elses_until_its_lease_ends(
    aredis: aioredis.Redis, prefix: str
) -> None:
    clock = Clock()
    store, _ = await choose(aredis, prefix, CONFIG, ["a", "b"], clock)
    a, b = item_key("m", "qa", "a"), item_key("m", "qa", "b")
    assert (await store.reserve(a, "ana"))[0] == "ok"
    assert await store.reserve(a, "bo") == ("taken", None)
    assert (await store.reserve(b, "bo"))[0] == "ok"
    [listed] = [s for s in await store.summaries() if s.key == a]
    assert listed.reserved_by == ["ana"] and not listed.open_to("bo") and listed.open_to("ana")
    clock.now += 30
    assert (await store.reserve(a, "ana"))[0] == "ok"  # renewed: 60 s from now
    clock.now += 59
    assert await store.reserve(a, "cy") == ("taken", None)
    clock.now += 2  # the lease ran out
    outcome, until = await store.reserve(a, "cy")
    assert outcome == "ok" and until == int((clock.now + 60) * 1000)
    # one item at a time: cy opening b... b is bo's; cy releases a by opening nothing else, bo moves to a
    await store.release(a, "cy")
    assert (await store.reserve(a, "bo"))[0] == "ok"  # bo's reservation of b ends with it
    assert (await store.reserve(b, "cy"))[0] == "ok"


async def test_a_stale_read_of_the_held_item_still_releases_it(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store reads which item an annotator holds before the script (whose keys it must declare); when
    that changed meanwhile the script says so and the store calls again with the right keys."""
    store, _ = await choose(aredis, prefix, CONFIG, ["a", "b"], Clock())
    a, b = item_key("m", "qa", "a"), item_key("m", "qa", "b")
    assert (await store.reserve(a, "ana"))[0] == "ok"
    real = store.client.hget
    stale = [None]

    async def read(*args: Any) -> Any:  # the first read misses ana's reservation of a
        return stale.pop() if stale else await real(*args)

    monkeypatch.setattr(store.client, "hget", read)
    assert (await store.reserve(b, "ana"))[0] == "ok"
    assert not stale
    [listed] = [s for s in await store.summaries() if s.key == a]
    assert listed.reserved_by == []  # a is free again: ana holds b only
    assert (await store.reserve(a, "bo"))[0] == "ok"


async def test_the_key_check_catches_an_undeclared_key(aredis: aioredis.Redis, prefix: str) -> None:
    """The check these tests run the scripts under (tests/lua_keys.py) is not vacuous."""
    tag = f"{prefix}{{rp}}:"
    script = aredis.register_script(
        declared_only("redis.call('SET', KEYS[1], 1); return redis.call('GET', ARGV[1])")
    )
    assert await script(keys=[tag + "x"], args=[tag + "x"]) == b"1"
    with pytest.raises(ResponseError, match=r"undeclared key .*y in GET"):
        await script(keys=[tag + "x"], args=[tag + "y"])


async def test_racing_annotators_get_one_reservation_of_one_place(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store, _ = await choose(aredis, prefix, CONFIG, ["a"], Clock())
    key = item_key("m", "qa", "a")
    outcomes = await asyncio.gather(*(store.reserve(key, f"p{i}") for i in range(40)))
    assert sorted(o for o, _ in outcomes).count("ok") == 1


async def test_never_twice_to_one_annotator(aredis: aioredis.Redis, prefix: str) -> None:
    store, _ = await choose(
        aredis, prefix, CONFIG.model_copy(update={"reviewers": 2}), ["a", "b", "c"], Clock()
    )
    a, b = item_key("m", "qa", "a"), item_key("m", "qa", "b")
    assert (await store.reserve(a, "ana"))[0] == "ok"
    assert (await store.reserve(a, "bo"))[0] == "ok"  # two reviewers: two places
    assert await store.reserve(a, "cy") == ("taken", None)
    assert await store.labelled(a, "ana", b'{"id":"a","passed":true}') == 1
    assert await store.labelled(a, "ana", b'{"id":"a","passed":false}') == 0  # a retried submit
    assert await store.reserve(a, "ana") == ("labelled", None)
    assert await store.skip(b, "ana")
    assert await store.reserve(b, "ana") == ("skipped", None)
    assert [s.fields["id"] for s in await store.queue("ana")] == ["c"]
    assert {s.fields["id"] for s in await store.queue("cy")} == {"a", "b", "c"}  # a: bo's place is live
    assert await store.labelled(a, "bo", b'{"id":"a","passed":false}') == 1
    assert await store.reserve(a, "cy") == ("complete", None)
    assert "a" not in {s.fields["id"] for s in await store.queue("cy")}
    [done] = [s for s in await store.summaries() if s.key == a]
    assert done.done == 2 and done.labelled_by == ["ana", "bo"] and done.reserved_by == []


async def test_progress_per_queue_and_annotator(aredis: aioredis.Redis, prefix: str) -> None:
    clock = Clock()
    store, _ = await choose(aredis, prefix, CONFIG, ["a", "b", "c"], clock)
    await choose(aredis, prefix, CONFIG, ["x"], clock, model="m2")
    a, b, c = (item_key("m", "qa", i) for i in "abc")
    await store.reserve(a, "ana")
    await store.labelled(a, "ana", b"{}")
    await store.skip(b, "ana")
    await store.reserve(c, "bo")
    progress = (await store.progress()).as_json()
    assert progress["queues"] == [
        {"model": "m", "suite": "qa", "items": 3, "complete": 1, "labels": 1, "open": 2, "reserved": 1},
        {"model": "m2", "suite": "qa", "items": 1, "complete": 0, "labels": 0, "open": 1, "reserved": 0},
    ]
    assert progress["annotators"] == [
        {"annotator": "ana", "labelled": 1, "skipped": 1, "holding": 0},
        {"annotator": "bo", "labelled": 0, "skipped": 0, "holding": 1},
    ]


async def test_filters_and_order(aredis: aioredis.Redis, prefix: str) -> None:
    clock = Clock()
    store, _ = await choose(aredis, prefix, CONFIG, ["old-gate"], clock)
    gate = item_key("m", "qa", "old-gate")
    await aredis.hset(f"{prefix}{{rp}}:m:{gate}", mapping={"rank": 0, "reasons": "gate_failed"})
    clock.now += 1
    await choose(aredis, prefix, CONFIG, ["new"], clock)
    assert [s.fields["id"] for s in await store.queue("ana")] == ["new", "old-gate"]
    assert [s.fields["id"] for s in await store.queue("ana", order="important")] == ["old-gate", "new"]
    assert [s.fields["id"] for s in await store.queue("ana", reason="gate_failed")] == ["old-gate"]
    assert await store.queue("ana", model="other") == [] and await store.queue("ana", suite="qa")


async def test_export_lines_items_labels_and_golden_events(aredis: aioredis.Redis, prefix: str) -> None:
    store, _ = await choose(aredis, prefix, CONFIG.model_copy(update={"reviewers": 2}), ["a", "b"], Clock())
    a = item_key("m", "qa", "a")
    first = {
        "id": "a",
        "model": "m",
        "suite": "qa",
        "passed": False,
        "annotator": "ana",
        "timestamp": "2026-11-21T10:00:40Z",
        "expected": "北京市",
    }
    second = {"id": "a", "passed": True, "annotator": "bo", "timestamp": "2026-11-21T10:00:50Z"}
    await store.labelled(a, "ana", orjson.dumps(first))
    await store.labelled(a, "bo", orjson.dumps(second))
    docs = await store.labelled_documents()
    assert len(docs) == 1  # b has no label
    items = [orjson.loads(line) for line in export_lines(docs, "items")]
    assert [i["label"]["annotator"] for i in items] == ["ana", "bo"]
    assert items[0]["expected"] == "北京市" and "expected" not in items[1]
    assert items[0]["event"]["id"] == "a" and items[0]["result"]["id"] == "a"
    assert [orjson.loads(line) for line in export_lines(docs, "labels")] == [first, second]
    [golden] = [orjson.loads(line) for line in export_lines(docs, "events")]
    assert golden["expected"] == "北京市" and golden["output"] == "北京"
    assert await store.labelled_documents(model="other") == []


@pytest.mark.parametrize(
    ("prompt", "category", "scale", "criteria"),
    [
        ("rubric", "qa_simple", "1-5", ["accuracy", "conciseness", "clarity"]),
        (
            "rubric",
            "code_generation",
            "0-10",
            ["code_correctness", "code_style", "efficiency", "documentation"],
        ),
        ("report", None, "0-10", ["relevance", "depth", "accuracy", "structure", "clarity", "completeness"]),
    ],
)
def test_the_form_is_the_suites_rubric(
    prompt: str, category: str | None, scale: str, criteria: list[str]
) -> None:
    base = result("f", {"alpha": 5.0})
    assert base.judge is not None
    verdicts = [v.model_copy(update={"scale": scale}) for v in base.judge.judges]
    graded = base.model_copy(
        update={
            "judge": base.judge.model_copy(
                update={"prompt": prompt, "category": category, "judges": verdicts}
            )
        }
    )
    form = form_of(graded)
    assert form["scale"] == scale and [c["name"] for c in form["criteria"]] == criteria
    assert all(len(c["levels"]) == (5 if scale == "1-5" else 0) for c in form["criteria"])
    no_judge = base.model_copy(update={"judge": None, "category": "translation"})
    assert form_of(no_judge)["scale"] == "1-5"
    assert [c["name"] for c in form_of(no_judge)["criteria"]] == [
        "accuracy",
        "fluency",
        "cultural_appropriateness",
    ]


def document_of(graded: GradedResult, raw: bytes | None) -> dict[str, Any]:
    item = ReviewItem(
        id=graded.id,
        model=graded.model,
        suite=graded.suite,
        reasons=["control"],
        reason="r",
        score=graded.score,
        passed=graded.passed,
        threshold=graded.threshold,
        event_time=graded.event_time,
        selected_at=graded.event_time,
    )
    return item_document(item, graded, raw, 1)


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (b'{"id": "x", "model": "m", "output": "o", "expected": "e"}', True),
        (b'{"trace_id": "x", "completion": "o"}', False),  # a mapped JSON input: not a request event
        (b'{"resourceSpans": []}', False),  # OTLP/JSON
        (b"\x0a\x02\x08\x01", False),  # OTLP protobuf
        (None, False),
    ],
)
def test_only_a_native_request_event_is_kept_as_the_event(raw: bytes | None, kept: bool) -> None:
    graded = result("x", {"alpha": 9.0, "beta": 1.0})
    doc = document_of(graded, raw)
    assert (doc["event"] is not None) == kept and doc["result"]["id"] == "x"


def test_a_long_event_keeps_its_texts_cut() -> None:
    graded = result("x", {"alpha": 9.0})
    raw = orjson.dumps(
        {
            "id": "x",
            "model": "m",
            "output": "o" * MAX_EVENT_BYTES,
            "references": ["r" * 9000],
            "metadata": {"k": 1},
        }
    )
    doc = document_of(graded, raw)
    assert doc["truncated"] is True and len(doc["event"]["output"]) == TEXT_CHARS
    assert len(doc["event"]["references"][0]) == TEXT_CHARS and "metadata" not in doc["event"]
    assert export_lines([(doc, {"ana": {"id": "x", "passed": True}})], "events") == []  # not a golden event
