"""Adaptive concurrency per judge (AIMD between 1 and max_concurrency, Retry-After pauses)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from _judges_helpers import event, judge
from prometheus_client import REGISTRY

from streameval.judges import JudgeHub, build_rubric
from streameval.judges._limit import AdaptiveLimit
from streameval.judges.sim import start_judge_sim

GOOD = orjson.dumps(
    {"scores": {"accuracy": 5, "conciseness": 4, "clarity": 5}, "overall_score": 4.7, "reasoning": "fine"}
).decode()


def gauge(name: str) -> float | None:
    return REGISTRY.get_sample_value("streameval_judge_concurrency_limit", {"judge": name})


async def test_aimd_halves_once_per_round_trip_and_grows_back() -> None:
    now = [0.0]
    limit = AdaptiveLimit("aimd-unit", 16, clock=lambda: now[0])
    started = [await limit.acquire() for _ in range(4)]
    now[0] = 1.0
    for s in started:  # four failures of attempts that all started before the decrease: one halving
        limit.congested(s)
        limit.release()
    assert limit.limit == 8 and gauge("aimd-unit") == 8
    limit.congested(await limit.acquire())  # started after the decrease: halves again
    limit.release()
    assert limit.limit == 4
    for _ in range(10):
        limit.congested(now[0] + 1)  # floor 1
        now[0] += 1
    assert limit.limit == 1
    for _ in range(200):
        limit.succeeded()
    assert limit.limit == 16 and gauge("aimd-unit") == 16  # capped at max_concurrency


async def test_the_limit_bounds_what_is_in_flight() -> None:
    limit = AdaptiveLimit("aimd-bound", 4)
    limit.limit = 2.0
    first, second = await limit.acquire(), await limit.acquire()
    third = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0.01)
    assert not third.done() and limit.in_flight == 2
    limit.release()
    await third
    assert limit.in_flight == 2 and first <= second


async def test_a_pause_holds_every_new_attempt_until_it_has_passed() -> None:
    limit = AdaptiveLimit("aimd-pause", 4)
    loop = asyncio.get_running_loop()
    limit.pause(0.2)
    began = loop.time()
    await asyncio.gather(*(limit.acquire() for _ in range(3)))
    assert loop.time() - began >= 0.19 and limit.in_flight == 3  # a lower bound: holds on any load


async def test_a_cancelled_waiter_gives_no_slot_away() -> None:
    limit = AdaptiveLimit("aimd-cancel", 1)
    await limit.acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    limit.release()
    assert limit.in_flight == 0
    await limit.acquire()
    assert limit.in_flight == 1


async def test_429s_lower_the_judges_limit_over_http_and_answers_raise_it() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(reply=GOOD, script=["429"] * 4, retry_after_s=0.05, requests=requests) as url:
        hub = JudgeHub(
            [judge("aimd-http", url, weight=1, max_concurrency=8, attempts=3, max_retry_after_s=0.05)],
            log_interval_s=None,
        )
        await hub.start()
        try:
            [j] = hub.panel(None)
            prompts = [
                build_rubric(event(output=f"Paris {n}"), "qa_simple", "1-5", blind=True) for n in range(4)
            ]
            verdicts = await asyncio.gather(*(hub.ask(j, p) for p in prompts))
            low = j.client._slots.limit
            more = [
                build_rubric(event(output=f"Lyon {n}"), "qa_simple", "1-5", blind=True) for n in range(40)
            ]
            for p in more:
                await hub.ask(j, p)
        finally:
            await hub.close()
    assert all(v.status == "ok" for v in verdicts)
    assert 4 <= low < 5  # four 429s of attempts started together: one halving (then 4 answers: +1/limit each)
    assert j.client._slots.limit == 8 and gauge("aimd-http") == 8


@pytest.mark.parametrize("adaptive", [False])
async def test_fixed_concurrency_when_not_adaptive(adaptive: bool) -> None:
    async with start_judge_sim(reply=GOOD, script=["500"] * 3) as url:
        hub = JudgeHub(
            [judge("aimd-off", url, weight=1, max_concurrency=8, attempts=1, adaptive_concurrency=adaptive)],
            log_interval_s=None,
        )
        await hub.start()
        try:
            [j] = hub.panel(None)
            for n in range(3):
                await hub.ask(j, build_rubric(event(output=f"x{n}"), "qa_simple", "1-5", blind=True))
        finally:
            await hub.close()
    assert j.client._slots.limit == 8


async def test_the_money_budget_is_shared_by_workers_through_redis(redis_url: str, prefix: str) -> None:
    """Two hubs (two workers) on one Redis prefix: what one spent this hour stops the other."""
    import redis.asyncio as aioredis

    from streameval.judges import JudgeCache, judge_counters

    client = aioredis.Redis.from_url(redis_url)
    requests: list[dict[str, Any]] = []
    try:
        async with start_judge_sim(reply=GOOD, requests=requests) as url:
            # 1 per input token: one call of ~500 prompt tokens spends the hour's budget of 100
            cfg = judge("priced", url, weight=1, price_input_per_mtok=1e6, budget_per_hour=100)
            first = JudgeHub([cfg], cache=JudgeCache(client, prefix=prefix), log_interval_s=None)
            second = JudgeHub([cfg], cache=JudgeCache(client, prefix=prefix), log_interval_s=None)
            await first.start()
            await second.start()
            try:
                [a], [b] = first.panel(None), second.panel(None)
                spent = await first.ask(a, build_rubric(event(output="one"), "qa_simple", "1-5", blind=True))
                assert a.money is not None and b.money is not None
                await a.money.sync()
                await b.money.sync()
                skipped = await second.ask(
                    b, build_rubric(event(output="two"), "qa_simple", "1-5", blind=True)
                )
            finally:
                await first.close()
                await second.close()
            total = float(await client.get(a.money.key(a.money._hour)) or 0)
    finally:
        await client.aclose()
    assert spent.status == "ok" and total == pytest.approx(spent.prompt_tokens + 0.0)
    assert (
        skipped.status == "skipped"
        and skipped.error == "budget"
        and "for this hour" in (skipped.reason or "")
    )
    assert len(requests) == 1 and judge_counters([skipped]) == {"priced.budget_skips": 1.0}


def test_a_money_budget_needs_prices() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="budget_per_hour needs price"):
        judge("j", "https://x", weight=1, budget_per_hour=5)


async def test_a_longer_pause_while_waiters_wait_still_ends() -> None:
    """Waiters behind a pause, nothing in flight, and the pause is extended: they still get their slots."""
    limit = AdaptiveLimit("aimd-extend", 2)
    limit.pause(0.05)
    waiters = [asyncio.ensure_future(limit.acquire()) for _ in range(2)]
    await asyncio.sleep(0)
    limit.pause(0.1)  # a later 429's Retry-After, with no attempt in flight to wake anyone afterwards
    done, _ = await asyncio.wait(waiters, timeout=10)
    assert len(done) == 2 and limit.in_flight == 2
