"""The review queue on a real Redis: why a result is chosen, and the rate bound under a burst."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from _feedback_helpers import result

from streameval.features.review import ReviewConfig, ReviewQueue, reasons
from streameval.keyspace import Keys
from streameval.models import GradedResult

CONFIG = ReviewConfig(rate_per_min=5, spread=3.0, margin=0.05, control_rate=0.0)


def with_gate(r: GradedResult) -> GradedResult:
    return r.model_copy(update={"failed_gates": ["no_pii"]})


def test_each_reason() -> None:
    agree = result("a", {"alpha": 9.0, "beta": 9.0, "gamma": 8.0}, rule=1.0)  # score 0.96: passes clearly
    assert reasons(agree, CONFIG) == []
    assert reasons(result("d", {"alpha": 9.0, "beta": 2.0, "gamma": 8.0}, rule=1.0), CONFIG) == [
        "judges_disagree"
    ]
    near = result("n", {"alpha": 6.0, "beta": 6.0, "gamma": 6.0}, rule=0.6)  # score 0.6 = the threshold
    assert reasons(near, CONFIG) == ["near_threshold"]
    assert reasons(with_gate(agree), CONFIG) == ["gate_failed"]
    sample = ReviewConfig(control_rate=0.5)
    chosen = [
        i
        for i in range(200)
        if reasons(result(f"c{i}", {"alpha": 9.0, "beta": 9.0, "gamma": 9.0}, rule=1.0), sample)
        == ["control"]
    ]
    assert 70 < len(chosen) < 130  # about half, and the same ones every time (a hash of the id)
    assert chosen == [
        i
        for i in range(200)
        if reasons(result(f"c{i}", {"alpha": 9.0, "beta": 9.0, "gamma": 9.0}, rule=1.0), sample)
    ]


async def test_the_rate_bound_holds_under_a_burst_across_workers(
    aredis: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    keys = Keys(prefix)
    other = aioredis.from_url(redis_url)
    try:
        queues = [ReviewQueue(aredis, keys, CONFIG), ReviewQueue(other, keys, CONFIG)]
        now = 1795255230.0  # 10:00:30: the minute [10:00, 10:01)
        burst = [result(f"b{i}", {"alpha": 9.0, "beta": 1.0, "gamma": 5.0}, rule=0.5) for i in range(300)]
        gated = [
            with_gate(result(f"g{i}", {"alpha": 9.0, "beta": 9.0, "gamma": 9.0}, rule=1.0)) for i in range(3)
        ]
        pair = keys.pair_id("m", "qa")
        batches = [[(pair, r, None) for r in burst[k : k + 50]] for k in range(0, 300, 50)]
        batches[3] += [(pair, r, None) for r in gated]
        # six batches at once from two workers: 303 candidates, 5 may go this minute
        picked = await asyncio.gather(*(queues[k % 2].select(b, now + k) for k, b in enumerate(batches)))
        items = [i for batch in picked for i in batch]
        assert len(items) == CONFIG.rate_per_min
        assert all(i.reasons for i in items) and all(i.reason for i in items)
        # within a batch the gate failures go first
        assert [i.id for i in picked[3]][: len(gated)] == [g.id for g in gated][: len(picked[3])]
        # another pair has its own budget; the next minute starts afresh
        assert len(await queues[0].select([(keys.pair_id("m2", "qa"), r, None) for r in burst[:9]], now)) == 5
        assert len(await queues[1].select([(pair, r, None) for r in burst[:9]], now + 60)) == 5
        assert await queues[1].select([(pair, r, None) for r in burst[:9]], now + 61) == []
        for item in items:
            if "judges_disagree" in item.reasons:
                assert item.judge_spread == 8.0 and item.judges == {"alpha": 9.0, "beta": 1.0, "gamma": 5.0}
                assert "judges disagree: spread 8 >= 3" in item.reason
            else:
                assert item.reasons == ["gate_failed"] and item.failed_gates == ["no_pii"]
    finally:
        await other.aclose()
