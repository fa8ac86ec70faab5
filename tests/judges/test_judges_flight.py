"""Single-flight (identical requests in flight make one call), the consistency repeat's order, and
refusals / default-stage answers (panel ``partial``; ``unscored: midpoint | exclude``)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _judges_helpers import event, judge

from streameval.config import parse_config
from streameval.judges import JudgeCache, JudgeHub, build_rubric, judge_counters
from streameval.judges._flight import SingleFlight
from streameval.judges._refusal import find_refusal
from streameval.judges.sim import start_judge_sim
from streameval.pipeline import Pipeline

GOOD = orjson.dumps(
    {"scores": {"accuracy": 5, "conciseness": 4, "clarity": 5}, "overall_score": 4.7, "reasoning": "fine"}
).decode()


def _raw(**fields: Any) -> bytes:
    base = {
        "id": f"ev-{uuid.uuid4().hex}",
        "model": "m",
        "input": "What is the capital of France?",
        "output": "The capital of France is Paris.",
        "expected": "Paris",
        "category": "qa_simple",
    }
    base.update(fields)
    return orjson.dumps(base)


async def _pipeline(judges: list[Any], suite: dict[str, Any], **kw: Any) -> Pipeline:
    _, suites = parse_config(
        {"judges": [j.model_dump() for j in judges], "suites": [{"name": "s", "default": True, **suite}]}
    )
    pipeline = Pipeline(suites, **kw)
    await pipeline.start()
    return pipeline


@pytest.mark.parametrize("with_cache", [False, True])
async def test_identical_requests_in_flight_make_one_call(
    with_cache: bool, redis_url: str, prefix: str
) -> None:
    """50 events with 4 distinct outputs at once: 4 calls per judge, 46 cache hits (was 50 calls)."""
    requests: list[dict[str, Any]] = []
    client = aioredis.Redis.from_url(redis_url)
    cache = JudgeCache(client, prefix=prefix) if with_cache else None
    async with start_judge_sim(latency_ms=100, requests=requests) as url:
        cfgs = [judge("a", url, weight=0.5), judge("b", url, weight=0.5, protocol="anthropic")]
        hub = JudgeHub(cfgs, cache=cache, log_interval_s=None)
        await hub.start()
        try:
            prompts = [
                build_rubric(event(id=f"e{n}", output=f"Paris {n % 4}"), "qa_simple", "1-5", blind=True)
                for n in range(50)
            ]
            verdicts = await asyncio.gather(
                *(hub.ask_all([(j, p) for j in hub.panel(None)]) for p in prompts)
            )
        finally:
            await hub.close()
            await client.aclose()
    assert len(requests) == 2 * 4
    flat = [v for vs in verdicts for v in vs]
    assert all(v.status == "ok" for v in flat)
    counters = judge_counters(flat)
    for name in ("a", "b"):
        assert counters[f"{name}.calls"] == 4 and counters[f"{name}.cache_hits"] == 46
    # a follower's score is the leader's
    by_output: dict[tuple[str, int], set[float | None]] = {}
    for n, vs in enumerate(verdicts):
        for v in vs:
            by_output.setdefault((v.name, n % 4), set()).add(v.score)
    assert all(len(scores) == 1 for scores in by_output.values())
    assert hub.stats.total["a"].calls == 4 and hub.stats.total["a"].cache_hits == 46


async def test_a_failed_leader_fails_its_followers_without_calls() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(latency_ms=50, script=["500"], requests=requests) as url:
        hub = JudgeHub([judge("a", url, weight=1, attempts=1)], log_interval_s=None)
        await hub.start()
        try:
            [j] = hub.panel(None)
            prompt = build_rubric(event(), "qa_simple", "1-5", blind=True)
            verdicts = await asyncio.gather(*(hub.ask(j, prompt) for _ in range(5)))
        finally:
            await hub.close()
    assert len(requests) == 1
    assert all(v.status == "error" and v.error == "judge_http_error" for v in verdicts)
    assert [v.attempts for v in verdicts] == [1, 0, 0, 0, 0]
    assert all("the same request in flight failed" in (v.reason or "") for v in verdicts[1:])
    counters = judge_counters(verdicts)
    assert counters["a.calls"] == 1 and counters["a.errors"] == 5 and "a.cache_hits" not in counters
    assert dict(hub.stats.total["a"].errors) == {"judge_http_error": 5}


async def test_a_cancelled_leader_hands_over_to_a_follower() -> None:
    flights: SingleFlight[int] = SingleFlight()
    gate = asyncio.Event()
    runs: list[str] = []

    async def work(name: str) -> int:
        runs.append(name)
        await gate.wait()
        return len(runs)

    leader = asyncio.ensure_future(flights.do("k", lambda: work("leader")))
    await asyncio.sleep(0)
    follower = asyncio.ensure_future(flights.do("k", lambda: work("follower")))
    await asyncio.sleep(0)
    leader.cancel()
    await asyncio.gather(leader, return_exceptions=True)
    gate.set()
    assert await follower == (2, False) and runs == ["leader", "follower"] and len(flights) == 0


async def test_the_consistency_repeat_goes_after_its_primary_and_its_failure_keeps_the_primary() -> None:
    """One slot, consistency 1: the primary is answered first (ok), the repeat gets the 500."""
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(reply=GOOD, script=["ok", "500"], requests=requests) as url:
        pipeline = await _pipeline(
            [judge("a", url, weight=1, attempts=1, max_concurrency=1)],
            {"evaluators": [{"evaluator": "exact_match"}], "judge": {"consistency_rate": 1.0}},
        )
        try:
            outcome = await pipeline.process(_raw())
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.judge is not None
    block = outcome.result.judge
    assert block.status == "ok" and block.judges[0].status == "ok" and block.panel_score is not None
    panel = next(r for r in outcome.result.evaluators if r.name == "judge_panel")
    assert panel.details is not None and panel.details["repeat"] == {"a": None}
    assert len(requests) == 2
    counters = outcome.counters["judge_panel"]
    assert counters["a.repeat_calls"] == 1 and "repeat:n" not in counters


async def test_a_repeat_never_rescues_a_failed_primary() -> None:
    """The primary fails (500), its repeat (in flight at the same time) answers: the panel still failed."""
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(reply=GOOD, script=["500"], requests=requests) as url:
        pipeline = await _pipeline(
            [judge("a", url, weight=1, attempts=1)],
            {"evaluators": [{"evaluator": "exact_match"}], "judge": {"consistency_rate": 1.0}},
        )
        try:
            outcome = await pipeline.process(_raw())
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.judge is not None
    assert (
        outcome.result.judge.status == "failed" and outcome.result.judge.judges[0].error == "judge_http_error"
    )
    assert "repeat:n" not in outcome.counters["judge_panel"]


async def test_a_primary_that_failed_before_any_call_gets_no_repeat() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(reply=GOOD, requests=requests) as url:
        # a budget of one token: the first call spends it, the second event's primary is skipped
        pipeline = await _pipeline(
            [judge("a", url, weight=1, tokens_per_minute=1)],
            {"evaluators": [{"evaluator": "exact_match"}], "judge": {"consistency_rate": 1.0}},
        )
        try:
            await pipeline.process(_raw(output="one"))
            calls = len(requests)
            outcome = await pipeline.process(_raw(output="two"))
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.judge is not None
    assert outcome.result.judge.judges[0].status == "skipped" and len(requests) == calls


REFUSAL = "I am unable to evaluate this material."


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (REFUSAL, "I am unable to evaluate"),
        ("I'm sorry, but I can't help with that.", "I'm sorry, but"),
        ("I cannot provide a score for this content.", "I cannot provide"),
        ("抱歉，我无法评估该内容。", "抱歉"),
        ("Accuracy: 4. The answer is clear.", None),
        ("The model is unable to evaluate integrals.", None),
    ],
)
def test_find_refusal(text: str, phrase: str | None) -> None:
    assert find_refusal(text) == phrase


@pytest.mark.parametrize(
    ("policy", "reply"),
    [
        ("midpoint", REFUSAL),
        ("exclude", REFUSAL),
        ("midpoint", "no scores here"),
        ("exclude", "no scores here"),
    ],
)
async def test_refusals_and_default_answers_make_the_panel_partial(policy: str, reply: str) -> None:
    kind = "refusal" if reply == REFUSAL else "default"
    async with start_judge_sim(reply=GOOD) as good_url, start_judge_sim(reply=reply) as bad_url:
        judges = [judge("good", good_url, weight=0.5), judge("bad", bad_url, weight=0.5)]
        pipeline = await _pipeline(
            judges,
            {
                "evaluators": [{"evaluator": "exact_match"}],
                "judge": {"consistency_rate": 0, "unscored": policy},
            },
        )
        try:
            outcome = await pipeline.process(_raw())
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.judge is not None
    block = outcome.result.judge
    good, bad = block.judges
    assert block.status == "partial" and good.status == "ok" and good.score is not None
    counters = outcome.counters["judge_panel"]
    if policy == "midpoint":  # the multi-judge spec: the midpoint, 3 on 1-5 = 5 on 0-10
        assert bad.status == "ok" and bad.score == 5.0
        assert block.panel_score == pytest.approx((good.score + 5.0) / 2)
        assert f"bad: {kind}" in block.reason and "counted as the midpoint" in block.reason
        assert counters["bad.n"] == 1
    else:
        assert bad.status == "error" and bad.score is None
        assert bad.error == ("judge_refused" if kind == "refusal" else "judge_no_score")
        assert block.panel_score == pytest.approx(good.score)
        assert counters["bad.errors"] == 1 and "bad.n" not in counters


async def test_refusals_are_not_cached(redis_url: str, prefix: str) -> None:
    requests: list[dict[str, Any]] = []
    client = aioredis.Redis.from_url(redis_url)
    try:
        async with start_judge_sim(reply=REFUSAL + " Accuracy: 2", requests=requests) as url:
            hub = JudgeHub(
                [judge("a", url, weight=1)], cache=JudgeCache(client, prefix=prefix), log_interval_s=None
            )
            await hub.start()
            try:
                [j] = hub.panel(None)
                prompt = build_rubric(event(), "qa_simple", "1-5", blind=True)
                first = await hub.ask(j, prompt)
                second = await hub.ask(j, prompt)
            finally:
                await hub.close()
    finally:
        await client.aclose()
    assert len(requests) == 2 and not second.cached
    # read by the regex stage (accuracy 2), but a refusal: the midpoint, and said so
    assert first.parse == "regex" and first.score == 5.0 and first.scores["accuracy"] == 3.0
    assert any(w.startswith("refusal: ") for w in first.warnings)


async def test_waiting_for_a_judge_slot_never_counts_against_the_timeout() -> None:
    """One slot, 300 ms answers, a 1.5 s timeout, 10 distinct requests at once: the last waits ~2.7 s."""
    async with start_judge_sim(reply=GOOD, latency_ms=300) as url:
        hub = JudgeHub(
            [judge("a", url, weight=1, attempts=1, max_concurrency=1, timeout_s=1.5)], log_interval_s=None
        )
        await hub.start()
        try:
            [j] = hub.panel(None)
            prompts = [
                build_rubric(event(output=f"Paris {n}"), "qa_simple", "1-5", blind=True) for n in range(10)
            ]
            verdicts = await asyncio.gather(*(hub.ask(j, p) for p in prompts))
        finally:
            await hub.close()
    assert [v.status for v in verdicts] == ["ok"] * 10


async def test_the_hub_logs_a_summary_per_judge_while_judges_fail(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streameval.judges")
    async with start_judge_sim(script=["500", "500"], reply=GOOD) as url:
        hub = JudgeHub([judge("a", url, weight=1, attempts=1)], log_interval_s=0.05)
        await hub.start()
        try:
            [j] = hub.panel(None)
            for n in range(3):
                await hub.ask(j, build_rubric(event(output=f"Paris {n}"), "qa_simple", "1-5", blind=True))
            deadline = asyncio.get_running_loop().time() + 10
            while not any("judge a:" in r.getMessage() for r in caplog.records):
                assert asyncio.get_running_loop().time() < deadline, "no judge summary logged"
                await asyncio.sleep(0.02)
        finally:
            await hub.close()
    [record] = [r for r in caplog.records if "judge a:" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith("judge a: 3 calls, 0 cache hits, 2 errors (judge_http_error 2); last error: ")
    assert "HTTP 500" in message or "500" in message
