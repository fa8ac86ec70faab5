"""Suite versions end to end on the real broker (Tansu) and Redis (docs/versions.md).

A live worker runs version 1 over the events; a backfill of version 2 replays the same events from the
topic: version 1's figures do not move, version 2's are exact, the comparison's flips are those of the
published results, an interrupted backfill resumes without counting anything twice, and ``--from`` skips
older records by their own timestamp (Tansu answers offset 0 to every offsets_for_times).
"""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.backfill import run_backfill
from streameval.config import load_config, parse_config_text
from streameval.embedded import EmbeddedBroker
from streameval.features.web import dashboard_features
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.keyspace import Keys
from streameval.models import GradedResult, format_time
from streameval.pipeline import Pipeline
from streameval.settings import load_settings
from streameval.store import hash_fields

pytestmark = pytest.mark.integration

V1 = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}, {evaluator: contains, weight: 0}]
"""
V2 = """
suites:
  - name: qa
    default: true
    threshold: 0.5
    label: softer
    evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}, {evaluator: contains, weight: 0}]
"""
OUTPUTS = ["Paris", "Pariss", "London", "paris", "Paris!", "Lyon", "Parus", "P", "Paris is it", "Rome"]


def events(run: str, n: int, at: float) -> list[bytes]:
    return [
        raw_event(
            id=f"{run}-{i}",
            model="m",
            output=OUTPUTS[i % len(OUTPUTS)],
            expected="Paris",
            timestamp=format_time(at + i * 0.01),
        )
        for i in range(n)
    ]


def settings_for(broker: EmbeddedBroker, redis_url: str, prefix: str, topics: dict[str, str]) -> Any:
    return load_settings(
        kafka_bootstrap_servers=broker.bootstrap,
        redis_url=redis_url,
        redis_prefix=prefix,
        app_id=f"bf-{prefix[-13:-1]}",
        topic_requests=topics["requests"],
        topic_results=topics["results"],
        topic_sessions=topics["sessions"],
        windows=(60,),
    )


async def all_time(aredis: aioredis.Redis, prefix: str, version: str) -> dict[str, float]:
    return hash_fields(await aredis.hgetall(Keys(prefix).all_time(Keys.pair_id("m", "qa", version))))


async def expected(text: str, raws: list[bytes]) -> list[GradedResult]:
    _, suites = parse_config_text(textwrap.dedent(text))
    pipeline = Pipeline(suites)
    return [o.result for o in [await pipeline.process(r) for r in raws] if o.result is not None]


async def test_live_v1_and_backfill_v2_on_the_same_events(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    redis_url: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    v1_file, v2_file = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    v1_file.write_text(V1)
    v2_file.write_text(V2)
    v1 = load_config(v1_file)[1].by_name["qa"].version
    _, suites2 = load_config(v2_file)
    v2 = suites2.by_name["qa"].version
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    start = time.time()
    raws = events("b", 60, start)
    await produce(broker.bootstrap, topics["requests"], raws, key=lambda v: orjson.loads(v)["id"].encode())

    # live v1: a worker counts every event once, keeping compact scores for a later backfill to compare with
    # (a live worker keeps none unless asked: docs/versions.md)
    worker = start_worker(v1_file, STREAMEVAL_COMPARE_TTL_S="259200")
    await collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= len(raws), timeout=90)
    for _ in range(100):
        if (await all_time(aredis, prefix, v1)).get("count") == len(raws):
            break
        await asyncio.sleep(0.1)
    before = await all_time(aredis, prefix, v1)
    assert before["count"] == len(raws)
    v1_windows = {
        k: await aredis.hgetall(k) async for k in aredis.scan_iter(match=f"{prefix}{{m:qa:{v1}}}:w:*")
    }

    settings = settings_for(broker, redis_url, prefix, topics)
    # a dry run counts and changes nothing
    dry = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), dry_run=True)
    assert dry.results == len(raws) and dry.estimated_cost is None  # no priced judges
    assert await all_time(aredis, prefix, v2) == {}

    # an interrupted backfill, then the same command again: resumes, counts nothing twice
    first = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), batch=16, stop_after=20)
    assert first.stopped == "interrupted" and 0 < first.counted < len(raws)
    second = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), batch=16)
    assert second.stopped == "end" and first.group == second.group
    assert first.counted + second.counted == len(raws)
    after = await all_time(aredis, prefix, v2)
    want = await expected(V2, raws)
    assert after["count"] == len(raws)
    assert after["passes"] == sum(r.passed for r in want)
    assert after["sum"] == pytest.approx(sum(r.score for r in want), abs=1e-9)
    # v1's figures did not move, not one field
    assert await all_time(aredis, prefix, v1) == before
    assert {k: await aredis.hgetall(k) for k in v1_windows} == v1_windows
    assert worker.proc.poll() is None

    # the backfill's results on the topic: marked, each event at least once, all of version 2
    records: list[Record] = await collect(
        broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 2 * len(raws), timeout=60
    )
    results = [GradedResult.model_validate_json(r.value) for r in records]
    live = {r.id: r for r in results if r.suite_version == v1}
    filled = {r.id: r for r in results if r.suite_version == v2}
    assert set(live) == set(filled) == {orjson.loads(r)["id"] for r in raws}
    assert all(r.backfill for r in filled.values()) and not any(r.backfill for r in live.values())

    # compare: the flips are the flips of the published results
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        resp = await client.get(f"/api/v1/stats/compare?model=m&suite=qa&a={v1}&b={v2}")
        body = (await resp.json())["data"]
    to_fail = sorted(i for i in live if live[i].passed and not filled[i].passed)
    to_pass = sorted(i for i in live if filled[i].passed and not live[i].passed)
    assert to_fail or to_pass
    assert body["n"] == len(raws)
    assert (body["pass_to_fail"], body["fail_to_pass"]) == (len(to_fail), len(to_pass))
    assert (
        sorted(body["pass_to_fail_ids"]) == to_fail[:10] and sorted(body["fail_to_pass_ids"]) == to_pass[:10]
    )
    # a label names one version: the backfill recorded it
    assert await aredis.hget(Keys(prefix).version_labels, "qa:softer") == v2.encode()


async def test_backfill_skips_records_before_from_by_their_own_timestamp(
    broker: EmbeddedBroker,
    topics: dict[str, str],
    aredis: aioredis.Redis,
    redis_url: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    await ensure_topics(broker.bootstrap, [topics["requests"], topics["results"]], partitions=1)
    old = events("old", 15, time.time() - 3600)  # the event times do not matter: the record's time does
    await produce(broker.bootstrap, topics["requests"], old)
    await asyncio.sleep(1.5)
    since = time.time()
    new = events("new", 12, time.time())
    await produce(broker.bootstrap, topics["requests"], new)
    _, suites2 = parse_config_text(textwrap.dedent(V2))
    settings = settings_for(broker, redis_url, prefix, topics)
    report = await run_backfill(settings, suites2, since_ms=int(since * 1000))
    assert report.in_range == len(new) and report.counted == len(new)
    assert report.offsets >= len(
        new
    )  # Tansu's offsets_for_times answers 0: the old records were read and skipped
    version = suites2.by_name["qa"].version
    assert (await all_time(aredis, prefix, version))["count"] == len(new)
    # --to before the new records: nothing more in range; the same group would resume, so a new range
    report = await run_backfill(
        settings, suites2, since_ms=int((since - 3600 * 2) * 1000), until_ms=int(since * 1000)
    )
    assert report.in_range == len(old)


async def test_backfill_refuses_a_live_version(
    broker: EmbeddedBroker, topics: dict[str, str], aredis: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    from streameval.errors import ConfigError
    from streameval.versionstore import VersionInfo, register_versions

    _, suites = parse_config_text(textwrap.dedent(V1))
    qa = suites.by_name["qa"]
    await register_versions(aredis, Keys(prefix), [VersionInfo("qa", qa.version, None, {})], run="live")
    with pytest.raises(ConfigError, match=qa.version):
        await run_backfill(settings_for(broker, redis_url, prefix, topics), suites, since_ms=0)
    assert not [k async for k in aredis.scan_iter(match=f"{prefix}{{m:qa:*")]


SESSIONS = """
windowing: {{close_interval_s: 0.2}}
suites:
  - name: chat
    default: true
    threshold: {threshold}
    evaluators: [{{evaluator: exact_match}}]
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    gap_s: 1
    evaluators: [{{evaluator: turn_scores, params: {{stat: {stat}}}}}]
"""
#: per conversation, its turns' outputs: the mean and the min of their scores tell passes from fails apart
THREADS = [
    ["Paris", "Paris", "Rome"],
    ["Paris", "Paris", "Paris"],
    ["Rome", "Rome", "Paris"],
    ["Paris", "Rome"],
]


def conversation(conv: int, outputs: list[str], at: float) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "id": f"c{conv}-{i}",
                "model": "m",
                "input": f"q{i}",
                "output": output,
                "expected": "Paris",
                "timestamp": format_time(at + i * 0.01),
                "metadata": {"conversation_id": f"c{conv}", "last": i == len(outputs) - 1},
            }
        )
        for i, output in enumerate(outputs)
    ]


async def test_a_session_suite_is_backfilled_and_compared_like_an_event_suite(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    redis_url: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    from streameval.models import SessionResult

    v1_file, v2_file = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    v1_file.write_text(SESSIONS.format(stat="mean", threshold=0.6))
    v2_file.write_text(SESSIONS.format(stat="min", threshold=0.5))  # a backfill runs no live version
    [session1] = load_config(v1_file)[1].sessions
    _, suites2 = load_config(v2_file)
    [session2] = suites2.sessions
    v1, v2 = session1.suite.version, session2.suite.version
    assert v1 != v2
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    start = time.time()
    raws = [raw for c, outputs in enumerate(THREADS) for raw in conversation(c, outputs, start)]
    await produce(broker.bootstrap, topics["requests"], raws, key=lambda v: orjson.loads(v)["id"].encode())

    # live v1: each conversation closed on its end marker and published with its version
    worker = start_worker(v1_file, STREAMEVAL_COMPARE_TTL_S="259200")
    live_records: list[Record] = await collect(
        broker.bootstrap, [topics["sessions"]], until=lambda r: len(r) >= len(THREADS), timeout=90
    )
    live = {r.key: r for r in (SessionResult.model_validate_json(x.value) for x in live_records)}
    assert {r.suite_version for r in live.values()} == {v1} and not any(r.backfill for r in live.values())
    before = hash_fields(await aredis.hgetall(Keys(prefix).all_time(Keys.pair_id("m", "conv", v1))))
    assert before["count"] == len(THREADS)

    # backfill v2 of the session: an interrupted run judges no session; run again, every session once
    settings = settings_for(broker, redis_url, prefix, topics)
    first = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), batch=4, stop_after=4)
    assert first.stopped == "interrupted" and first.sessions == 0
    second = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), batch=4)
    assert second.stopped == "end" and second.versions["conv"] == v2
    assert second.sessions == second.sessions_counted == len(THREADS)
    after = hash_fields(await aredis.hgetall(Keys(prefix).all_time(Keys.pair_id("m", "conv", v2))))
    assert after["count"] == len(THREADS)
    assert hash_fields(await aredis.hgetall(Keys(prefix).all_time(Keys.pair_id("m", "conv", v1)))) == before
    # a third run of the same command (offsets committed at the end) reads nothing more
    third = await run_backfill(settings, suites2, since_ms=int((start - 5) * 1000), batch=4)
    assert third.offsets == 0 and third.sessions == 0

    records: list[Record] = await collect(
        broker.bootstrap, [topics["sessions"]], until=lambda r: len(r) >= 2 * len(THREADS), timeout=60
    )
    results = [SessionResult.model_validate_json(r.value) for r in records]
    filled = {r.key: r for r in results if r.suite_version == v2}
    assert set(filled) == set(live) == {f"c{c}" for c in range(len(THREADS))}
    assert all(r.backfill for r in filled.values())
    assert {k: r.turn_ids for k, r in filled.items()} == {k: r.turn_ids for k, r in live.items()}

    # compare the two versions of the session on the sessions both judged
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        resp = await client.get(f"/api/v1/stats/compare?model=m&suite=conv&a={v1}&b={v2}")
        body = (await resp.json())["data"]
    by_id = {r.id: (live[k], filled[k]) for k, r in filled.items()}
    to_fail = sorted(i for i, (a, b) in by_id.items() if a.passed and not b.passed)
    to_pass = sorted(i for i, (a, b) in by_id.items() if b.passed and not a.passed)
    assert to_fail  # mean passes, min fails: [Paris, Paris, Rome]
    assert body["n"] == len(THREADS)
    assert (body["pass_to_fail"], body["fail_to_pass"]) == (len(to_fail), len(to_pass))
    assert sorted(body["pass_to_fail_ids"]) == to_fail
    assert worker.proc.poll() is None
