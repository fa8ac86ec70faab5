"""Judges over real HTTP on loopback (the simulated judge), plus protocol details via MockTransport."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from _judges_helpers import event, judge
from aiohttp import web

from streameval.judges import JudgeCache, JudgeClient, JudgeConfig, JudgeHub, build_rubric, judge_counters
from streameval.judges.sim import start_judge_sim


async def _ask_one(cfg: JudgeConfig, **hub_kw: Any):  # type: ignore[no-untyped-def]
    hub = JudgeHub([cfg], **hub_kw)
    await hub.start()
    try:
        [j] = hub.panel(None)
        return await hub.ask(j, build_rubric(event(), "qa_simple", cfg.scale, blind=cfg.blind))
    finally:
        await hub.close()


@pytest.fixture
async def barrier_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A judge endpoint that answers only when ``parties`` requests are in flight at once."""
    state: dict[str, Any] = {"barrier": None}
    seen: list[int] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(1)
        await asyncio.wait_for(state["barrier"].wait(), timeout=5)
        text = orjson.dumps(
            {"scores": {"accuracy": 5, "conciseness": 5, "clarity": 5}, "overall_score": 5, "reasoning": "r"}
        ).decode()
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": {}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state["set"] = lambda n: state.__setitem__("barrier", asyncio.Barrier(n))
    try:
        yield f"http://127.0.0.1:{port}", seen, state  # type: ignore[misc]
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("events", [1, 10])
async def test_fan_out_all_judges_of_all_events_are_in_flight_together(barrier_server, events: int) -> None:  # type: ignore[no-untyped-def]
    url, seen, state = barrier_server
    state["set"](
        3 * events
    )  # answers only arrive once every call is in flight: a serial caller would time out
    cfgs = [judge(f"j{i}", url, weight=w, timeout_s=4, attempts=1) for i, w in enumerate((0.3, 0.3, 0.4))]
    hub = JudgeHub(cfgs)
    await hub.start()
    try:
        # distinct outputs: identical requests in flight would make one call (single-flight)
        asks = [
            hub.ask_all(
                [
                    (j, build_rubric(event(id=f"e{n}", output=f"Paris {n}"), "qa_simple", "1-5", blind=True))
                    for j in hub.panel(None)
                ]
            )
            for n in range(events)
        ]
        results = await asyncio.gather(*asks)
    finally:
        await hub.close()
    assert len(seen) == 3 * events
    assert all(v.status == "ok" and v.score == 10.0 for verdicts in results for v in verdicts)


@pytest.mark.parametrize(
    ("script", "attempts", "status", "calls"),
    [
        (["500", "500"], 3, "ok", 3),
        (["500", "500", "500"], 3, "error", 3),
        (["500"], 1, "error", 1),
        (["500", "ok"], 2, "ok", 2),
    ],
)
async def test_retries(script: list[str], attempts: int, status: str, calls: int) -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(script=script, requests=requests) as url:
        verdict = await _ask_one(judge("j", url, weight=1, attempts=attempts))
    assert verdict.status == status and len(requests) == calls and verdict.attempts == calls
    if status == "error":
        assert verdict.error == "judge_http_error" and "HTTP 500" in (verdict.reason or "")


@pytest.mark.parametrize(("retry_after", "cap", "slept"), [(7.0, 60.0, 7.0), (7.0, 3.0, 3.0)])
async def test_429_honours_retry_after(retry_after: float, cap: float, slept: float) -> None:
    sleeps: list[float] = []

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    async with start_judge_sim(script=["429", "ok"], retry_after_s=retry_after) as url:
        client = JudgeClient(judge("j", url, weight=1, retry_wait_s=2.0, max_retry_after_s=cap), sleep=record)
        await client.start()
        try:
            completion = await client.complete("system", "user")
        finally:
            await client.close()
    assert completion.attempts == 2 and sleeps == [slept]  # Retry-After, not the fixed 2 s wait


async def test_429_on_every_attempt_is_rate_limited() -> None:
    async with start_judge_sim(script=["429"] * 3, retry_after_s=0.01) as url:
        verdict = await _ask_one(judge("j", url, weight=1))
    assert verdict.status == "error" and verdict.error == "judge_rate_limited"


@pytest.mark.parametrize(
    ("script", "attempts", "status"), [(["timeout"], 1, "error"), (["timeout", "ok"], 2, "ok")]
)
async def test_timeouts(script: list[str], attempts: int, status: str) -> None:
    async with start_judge_sim(script=script, hang_s=10) as url:
        # 2 s: far under the 10 s hang, and room for the answer on a loaded machine (0.3 s was not)
        verdict = await _ask_one(judge("j", url, weight=1, timeout_s=2.0, attempts=attempts))
    assert verdict.status == status
    if status == "error":
        assert verdict.error == "judge_timeout"


async def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    verdict = await _ask_one(judge("j", f"http://127.0.0.1:{port}", weight=1, attempts=2))
    assert verdict.status == "error" and verdict.error == "judge_unavailable"


@pytest.mark.parametrize(
    ("fault", "stage"),
    [
        ("ok", "json"),
        ("prose", "regex"),
        ("fenced", "fenced_json"),
        ("broken", "regex"),
        ("garbage", "default"),
    ],
)
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_parse_fallbacks_over_http(fault: str, stage: str, protocol: str) -> None:
    async with start_judge_sim(script=[fault]) as url:
        verdict = await _ask_one(judge("j", url, weight=1, protocol=protocol))
    assert verdict.status == "ok" and verdict.parse == stage
    assert verdict.prompt_tokens > 0 and verdict.completion_tokens > 0
    if stage == "default":
        # the simulator's garbage is a refusal ("I cannot evaluate this."): midpoint, and said so
        assert verdict.score == 5.0 and len(verdict.warnings) == 2
        assert verdict.warnings[1] == "refusal: I cannot evaluate"


@pytest.mark.parametrize("blind", [True, False])
async def test_blind_mode_model_name_absent_from_every_request_body(blind: bool) -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        cfgs = [
            judge("a", url, weight=0.5, blind=blind),
            judge("b", url, weight=0.5, protocol="anthropic", blind=blind),
        ]
        hub = JudgeHub(cfgs)
        await hub.start()
        ev = event(model="secret-model-under-test", tags=["secret-model-under-test"])
        try:
            verdicts = await hub.ask_all(
                [(j, build_rubric(ev, "qa_simple", "1-5", blind=blind)) for j in hub.panel(None)]
            )
        finally:
            await hub.close()
    assert all(v.status == "ok" for v in verdicts) and len(requests) == 2
    for body in requests:
        assert ("secret-model-under-test" in orjson.dumps(body).decode()) is (not blind)


@pytest.fixture
def redis_client(aredis: aioredis.Redis, prefix: str) -> tuple[aioredis.Redis, str]:
    """The shared Redis client and this test's key prefix (tests/conftest.py cleans up)."""
    return aredis, prefix


async def test_answers_without_a_score_are_not_cached(redis_client: tuple[aioredis.Redis, str]) -> None:
    client, prefix = redis_client
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(script=["garbage"], requests=requests) as url:
        hub = JudgeHub([judge("j", url, weight=1)], cache=JudgeCache(client, prefix=prefix, ttl_s=60))
        await hub.start()
        [j] = hub.panel(None)
        try:
            first = await hub.ask(j, build_rubric(event(), "qa_simple", "1-5", blind=True))
            second = await hub.ask(j, build_rubric(event(), "qa_simple", "1-5", blind=True))
        finally:
            await hub.close()
    assert (first.parse, second.parse, second.cached, len(requests)) == ("default", "json", False, 2)


async def test_cache_hit_costs_no_call(redis_client: tuple[aioredis.Redis, str]) -> None:
    client, prefix = redis_client
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        cfg = judge("j", url, weight=1)
        cache = JudgeCache(client, prefix=prefix, ttl_s=60)
        hub = JudgeHub([cfg], cache=cache)
        await hub.start()
        [j] = hub.panel(None)
        try:
            first = await hub.ask(j, build_rubric(event(id="a"), "qa_simple", "1-5", blind=True))
            again = await hub.ask(j, build_rubric(event(id="b"), "qa_simple", "1-5", blind=True))  # same text
            other = await hub.ask(j, build_rubric(event(output="Lyon"), "qa_simple", "1-5", blind=True))
        finally:
            await hub.close()
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert len(requests) == 2 and again.score == first.score and again.scores == first.scores
    assert judge_counters([again]) == {
        "j.cache_hits": 1.0,
        "j.n": 1.0,
        "j.score_sum": first.score,
        "j.score_sumsq": first.score**2,
    }  # type: ignore[operator]
    keys = [k.decode() async for k in client.scan_iter(match=f"{prefix}judge:j:*")]
    assert len(keys) == 2 and all(":judge-model-j:v1:" in k for k in keys)


async def test_token_budget_skips_with_reason_budget() -> None:
    async with start_judge_sim() as url:
        hub = JudgeHub([judge("j", url, weight=1, tokens_per_minute=50)])
        await hub.start()
        [j] = hub.panel(None)
        try:
            first = await hub.ask(j, build_rubric(event(), "qa_simple", "1-5", blind=True))
            second = await hub.ask(j, build_rubric(event(output="x"), "qa_simple", "1-5", blind=True))
        finally:
            await hub.close()
    assert first.status == "ok" and first.prompt_tokens + first.completion_tokens >= 50
    assert second.status == "skipped" and second.error == "budget"
    assert judge_counters([second]) == {"j.budget_skips": 1.0}


SECRET = "sk-test-" + uuid.uuid4().hex


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(401, json={"error": f"bad key {SECRET}"}),
        httpx.Response(500, text=f"upstream said {SECRET}"),
        httpx.Response(200, text=f"<html>{SECRET}</html>"),
        httpx.Response(200, json={"unexpected": SECRET}),
    ],
)
async def test_api_key_never_in_results_errors_or_logs(
    answer: httpx.Response, caplog: pytest.LogCaptureFixture
) -> None:
    seen_headers: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen_headers.append(request.headers)
        return answer

    cfg = judge("j", "http://127.0.0.1:1", weight=1, api_key_env="JUDGE_KEY", attempts=2)
    caplog.set_level(logging.DEBUG)
    verdict = await _ask_one(cfg, transport=httpx.MockTransport(handler), environ={"JUDGE_KEY": SECRET})
    assert seen_headers and seen_headers[0]["authorization"] == f"Bearer {SECRET}"
    assert verdict.status == "error"
    assert SECRET not in verdict.model_dump_json() and SECRET not in caplog.text


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_protocol_request_shapes(protocol: str) -> None:
    captured: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        if protocol == "openai":
            return httpx.Response(
                200,
                json={
                    "choices": [{"message": {"content": "0.5"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                },
            )
        return httpx.Response(
            200,
            json={
                "content": [{"type": "text", "text": "0.5"}],
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        )

    base = "https://judge.example/api" + ("/v1" if protocol == "openai" else "")
    cfg = JudgeConfig(name="j", protocol=protocol, base_url=base, model="judge-m", weight=1, api_key_env="K")  # type: ignore[arg-type]
    client = JudgeClient(cfg, transport=httpx.MockTransport(handler), environ={"K": "key"})
    await client.start()
    try:
        completion = await client.complete("SYS", "USER")
    finally:
        await client.close()
    [request] = captured
    body = orjson.loads(request.content)
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("0.5", 3, 1)
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-m", 0.3, 2048)
    if protocol == "openai":
        assert str(request.url) == "https://judge.example/api/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer key"
        assert body["messages"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"}]
    else:
        assert str(request.url) == "https://judge.example/api/v1/messages"
        assert request.headers["x-api-key"] == "key" and request.headers["anthropic-version"] == "2023-06-01"
        assert body["system"] == "SYS" and body["messages"] == [{"role": "user", "content": "USER"}]
