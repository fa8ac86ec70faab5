"""Drill-down examples on the real Redis server: exact samples with any number of workers, few candidates."""

from __future__ import annotations

import random

import orjson
import redis.asyncio as aioredis

from streameval.features.drilldown import Candidates, ExamplesRecorder, compact, example_ids, sample_rank
from streameval.keyspace import Keys
from streameval.models import EvaluatorResult, GradedResult, JudgeBlock, JudgeVerdict, format_time, parse_time
from streameval.store import ResultStore

SIZE = 60
T0 = 1_800_000_000 - 1_800_000_000 % 3600


def graded(i: int, score: float, at: float, *, reason: str = "") -> GradedResult:
    return GradedResult(
        id=f"e{i}",
        model="m",
        suite="s",
        score=score,
        passed=score >= 0.5,
        threshold=0.5,
        grade="good" if score >= 0.5 else "fail",
        evaluators=[
            EvaluatorResult(name="ev", score=score, passed=score >= 0.5, weight=1, reason=reason or f"r{i}")
        ],
        event_time=format_time(at),
        evaluated_at=format_time(at),
        latency_ms=1.0,
        pipeline_version="t",
    )


async def test_samples_are_exact_with_two_workers_and_many_batches(
    aredis: aioredis.Redis, prefix: str
) -> None:
    """Whatever the cut-offs skip, the kept sets equal the lowest scores and latest failures of all events."""
    rng = random.Random(7)
    workers = [
        ResultStore(aredis, prefix=prefix, windows=(SIZE, 3600), recorders=[ExamplesRecorder(6)])
        for _ in range(2)
    ]
    results = [graded(i, round(rng.random(), 4), T0 + rng.uniform(0, 3 * SIZE)) for i in range(600)]
    for b in range(0, len(results), 40):  # batches go to the workers in turn
        batch = results[b : b + 40]
        await workers[(b // 40) % 2].record_many([(r, r.model_dump_json().encode(), None) for r in batch])
    keys, pair = Keys(prefix), Keys.pair_id("m", "s")
    for size, start in [(SIZE, T0), (SIZE, T0 + SIZE), (SIZE, T0 + 2 * SIZE), (3600, T0)]:
        inside = [r for r in results if start <= _epoch(r) < start + size]
        assert len(inside) > 100
        worst = await aredis.zrange(keys.examples(pair, "worst", size, start), 0, -1)
        expected = sorted(inside, key=lambda r: (r.score, r.id))[:6]
        assert [orjson.loads(m)["score"] for m in worst] == [r.score for r in expected]
        failing = await aredis.zrange(keys.examples(pair, "failing", size, start), 0, -1)
        rank = {
            r.id: sample_rank(workers[0]._prepare(0, (r, b"", None)).digest) for r in inside if not r.passed
        }
        assert [orjson.loads(m)["id"] for m in failing] == sorted(rank, key=rank.__getitem__)[:6]
        assert 0 < await aredis.ttl(keys.examples(pair, "worst", size, start)) <= 86400


def _epoch(r: GradedResult) -> float:
    return parse_time(r.event_time)


def test_the_cut_off_sends_only_what_can_enter() -> None:
    candidates = Candidates(Keys("p:"), keep=3)
    low = [(graded(i, 0.1 * i, T0 + i), T0 + i, bytes([10 + i]) * 8) for i in range(5)]
    _, args, sent = candidates.part("m:s", (SIZE,), low, example_ttl_s=60)
    assert sum(1 for kind in sent if kind[1] == "worst") == 3  # the batch's 3 lowest only
    candidates.commit(sent)
    assert sum(1 for kind in sent if kind[1] == "failing") == 3  # scores < 0.5 fail: 3 of 5, all can enter
    # a later batch of higher scores that passed: nothing can enter either set
    high = [(graded(10 + i, 0.9, T0 + 20 + i / 2), T0 + 20 + i / 2, b"d") for i in range(50)]
    klist, args, sent = candidates.part("m:s", (SIZE,), high, example_ttl_s=60)
    assert klist == [] and sent == []  # nothing is written
    assert args == [3, 60]  # no zset: examples kept and their TTL only (the store then sends no block)
    # a new lowest score still goes through
    lowest = [(graded(99, 0.0, T0 + 30), T0 + 30, bytes(8))]  # the lowest score and the lowest sample rank
    klist, _, sent = candidates.part("m:s", (SIZE,), lowest, example_ttl_s=60)
    assert [s[1] for s in sent] == ["worst", "failing"] and len(klist) == 2
    # a failure whose sample rank is above the 3 sent cannot enter the failing sample
    late = [(graded(98, 0.45, T0 + 31), T0 + 31, b"\xff" * 8)]
    assert candidates.part("m:s", (SIZE,), late, example_ttl_s=60)[2] == []


async def test_mark_sets_get_their_ttl_once(aredis: aioredis.Redis, prefix: str) -> None:
    """The drill-down keys at the end of a call do not hide which mark sets already have their TTL."""
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,))
    first = [graded(i, 0.2, T0 + 1) for i in range(3)]
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in first])
    assert store._expiring and all(":mk:" in key or ":rid:" in key for key in store._expiring)


def test_compact_keeps_reasons_and_judges_reasoning_cut() -> None:
    verdict = JudgeVerdict(
        name="j1",
        model="gpt",
        weight=1,
        status="ok",
        prompt="standard",
        scale="0-10",
        score=2.0,
        reasoning="x" * 1000,
    )
    judge = JudgeBlock(
        status="ok",
        mode="blend",
        prompt="rubric",
        category=None,
        panel_score=2.0,
        metrics_score=3.0,
        final_score=2.5,
        reason="panel",
        judges=[verdict],
        fallbacks=[],
    )
    r = graded(1, 0.1, T0, reason="wrong city").model_copy(
        update={"judge": judge, "failed_gates": ["pii"], "reason": "gate pii failed"}
    )
    doc = orjson.loads(compact(r))
    assert doc["evaluators"][0]["reason"] == "wrong city" and doc["failed_gates"] == ["pii"]
    assert doc["judge"]["judges"][0]["score"] == 2.0 and len(doc["judge"]["judges"][0]["reasoning"]) == 400
    assert example_ids([compact(graded(i, 0.1, T0)) for i in range(5)]) == ["e0", "e1", "e2"]
