"""One channel's delivery over real HTTP on loopback: retries, Retry-After, timeouts, dead letters, marks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from _notify_helpers import Receiver, alert
from aiohttp import web

from streameval import telemetry
from streameval.features.notify import ChannelConfig, ChannelWorker, Links, Marks, sign
from streameval.keyspace import Keys


def channel(receiver: Receiver, kind: str = "webhook", **fields: Any) -> ChannelConfig:
    doc: dict[str, Any] = {"name": f"c{id(receiver)}", "kind": kind, "url": receiver.url + "/hook"}
    if kind == "webhook":
        doc["signing_secret"] = "k"
    return ChannelConfig.model_validate({**doc, **fields})


class Sleeps:
    """An injected sleep: records each delay asked for and yields without waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


async def receiver(*answers: Any) -> Receiver:
    """A receiver answering the scripted ``answers`` in turn (status, or (status, headers), or "hang"),
    then 202 for ever."""
    queue = list(answers)
    hang = asyncio.Event()  # never set: a request that never gets an answer

    async def script(request: web.Request, body: bytes) -> web.StreamResponse:
        answer = queue.pop(0) if queue else 202
        if answer == "hang":
            await hang.wait()
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return web.Response(status=status, headers=headers, text='{"status":"ok"}')

    return await Receiver(script).start()


def counter(metric: Any, name: str) -> float:
    return float(metric.labels(name)._value.get())


@pytest.mark.parametrize(
    ("answers", "attempts"),
    [
        ((500, 502, 503), 4),
        (((429, {"Retry-After": "0"}),), 2),
        (("hang",), 2),
    ],
)
async def test_failures_that_may_pass_are_retried(
    http: httpx.AsyncClient, answers: tuple[Any, ...], attempts: int
) -> None:
    server = await receiver(*answers)
    try:
        cfg = channel(server, timeout_s=0.3)
        sent_before = counter(telemetry.NOTIFY_SENT, cfg.name)
        worker = ChannelWorker(cfg, http, Links(None), sleep=Sleeps())
        outcome = await worker.deliver(alert())
        assert outcome.delivered and outcome.attempts == attempts and outcome.status == 202
        assert len(server.requests) == attempts
        assert counter(telemetry.NOTIFY_SENT, cfg.name) == sent_before + 1
        assert counter(telemetry.NOTIFY_RETRIED, cfg.name) == attempts - 1
        assert counter(telemetry.NOTIFY_FAILED, cfg.name) == attempts - 1
    finally:
        await server.stop()


async def test_retry_after_and_backoff_with_jitter(http: httpx.AsyncClient) -> None:
    server = await receiver(500, 500, (429, {"Retry-After": "7"}), 500)
    try:
        sleeps = Sleeps()
        worker = ChannelWorker(
            channel(server), http, Links(None), sleep=sleeps, jitter=lambda: 1.0, base_delay_s=1
        )
        outcome = await worker.deliver(alert())
        assert outcome.delivered and outcome.attempts == 5
        assert sleeps.delays == [1.0, 2.0, 7.0, 8.0]  # doubling; at least the 429's Retry-After
        half = ChannelWorker(channel(server), http, Links(None), sleep=(s := Sleeps()), jitter=lambda: 0.0)
        server.script = (await receiver(500)).script
        await half.deliver(alert())
        assert s.delays == [0.5]  # jitter: between half and all of the backoff
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("answers", "fields", "attempts", "answer"),
    [
        ((400,), {}, 1, "HTTP 400"),  # not worth another try
        ((403,), {}, 1, "HTTP 403"),
        ((500,) * 10, {"max_attempts": 3}, 3, "HTTP 500"),
        (((429, {"Retry-After": "3600"}),), {"max_retry_s": 60}, 1, "HTTP 429"),  # beyond the budget
        (("hang",) * 3, {"max_attempts": 3, "timeout_s": 0.2}, 3, "timeout after 0.2 s"),
    ],
)
async def test_what_cannot_be_delivered_ends_with_the_last_answer(
    http: httpx.AsyncClient, answers: tuple[Any, ...], fields: dict[str, Any], attempts: int, answer: str
) -> None:
    server = await receiver(*answers)
    try:
        cfg = channel(server, **fields)
        dead_before = counter(telemetry.NOTIFY_DEAD_LETTERED, cfg.name)
        outcome = await ChannelWorker(cfg, http, Links(None), sleep=Sleeps()).deliver(alert())
        assert not outcome.delivered and outcome.attempts == attempts
        assert outcome.answer.startswith(answer)
        assert counter(telemetry.NOTIFY_DEAD_LETTERED, cfg.name) == dead_before + 1
    finally:
        await server.stop()


async def test_a_channel_that_never_answers_does_not_delay_another(http: httpx.AsyncClient) -> None:
    stuck = await receiver(*(["hang"] * 100))
    good = await receiver()
    try:
        slow = ChannelWorker(channel(stuck, max_attempts=2, timeout_s=1), http, Links(None), sleep=Sleeps())
        fast = ChannelWorker(channel(good), http, Links(None))
        alerts = [alert(id=f"a{i}", model=f"m{i}") for i in range(5)]
        stuck_tasks = [slow.submit(a) for a in alerts]
        delivered = await asyncio.gather(*(fast.submit(a) for a in alerts))
        assert all(o.delivered for o in delivered) and len(good.requests) == 5
        assert not any(t.done() for t in stuck_tasks)  # still waiting on the other channel
        outcomes = await asyncio.gather(*stuck_tasks)
        assert [o.delivered for o in outcomes] == [False] * 5
        assert all(o.answer == "timeout after 1 s" for o in outcomes)
    finally:
        await stuck.stop()
        await good.stop()


async def test_rate_limit_spaces_requests(http: httpx.AsyncClient) -> None:
    server = await receiver()
    try:
        sleeps, now = Sleeps(), [100.0]
        worker = ChannelWorker(
            channel(server, rate_per_min=600), http, Links(None), sleep=sleeps, monotonic=lambda: now[0]
        )
        for i in range(3):
            assert (await worker.deliver(alert(id=f"r{i}"))).delivered
        assert sleeps.delays == pytest.approx(
            [0.1, 0.2]
        )  # 600 a minute: one every 0.1 s, clock standing still
    finally:
        await server.stop()


async def test_marks_send_once_and_resolve_only_where_the_trigger_went(
    http: httpx.AsyncClient, aredis: aioredis.Redis, prefix: str
) -> None:
    server = await receiver()
    try:
        marks = Marks(aredis, Keys(prefix))
        got_trigger = ChannelWorker(channel(server, name="first"), http, Links(None), marks)
        added_later = ChannelWorker(channel(server, name="later"), http, Links(None), marks)
        firing, resolved = alert(), alert(status="resolved")
        assert (await got_trigger.submit(firing)).answer.startswith("HTTP 202")
        repeat = await got_trigger.submit(firing)  # a redelivery: nothing sent
        assert repeat.delivered and repeat.answer == "skipped: this channel already accepted it"
        skipped = await added_later.submit(resolved)
        assert skipped.answer == "skipped: this channel did not get the trigger"
        assert (await got_trigger.submit(resolved)).answer.startswith("HTTP 202")
        assert (await got_trigger.submit(resolved)).answer.startswith("skipped")
        events = [headers["X-Streameval-Event"] for _, headers, _ in server.requests]
        assert events == ["firing", "resolved"]
        assert await aredis.exists(Keys(prefix).notify_open("first", "streameval:low-mean:60:gpt-4o:qa")) == 0
    finally:
        await server.stop()


async def test_a_detector_alerts_resolve_reaches_the_channel_that_took_it(
    http: httpx.AsyncClient, aredis: aioredis.Redis, prefix: str
) -> None:
    server = await receiver()
    try:
        worker = ChannelWorker(
            channel(server, kind="pagerduty", routing_key="R"), http, Links(None), Marks(aredis, Keys(prefix))
        )
        shift = alert(id="score_shift:overall:60:w:gpt-4o:qa", rule="score_shift", metric="score_shift")
        assert (await worker.submit(shift)).answer.startswith("HTTP 202")
        done = shift.model_copy(update={"status": "resolved", "resolution": "in_control"})
        assert (await worker.submit(done)).answer.startswith("HTTP 202")
        trigger, resolve = server.bodies()
        assert trigger["event_action"] == "trigger" and resolve["event_action"] == "resolve"
        assert resolve["dedup_key"] == trigger["dedup_key"] == f"streameval:{shift.id}"
    finally:
        await server.stop()


async def test_the_trigger_goes_before_its_resolve(http: httpx.AsyncClient) -> None:
    order: list[str] = []
    first = asyncio.Event()

    async def script(request: web.Request, body: bytes) -> web.StreamResponse:
        event = request.headers["X-Streameval-Event"]
        if event == "firing" and not first.is_set():
            first.set()
            await asyncio.sleep(0.05)  # the trigger's answer is slow: the resolve must still wait for it
        order.append(event)
        return web.Response(status=200)

    server = await Receiver(script).start()
    try:
        worker = ChannelWorker(channel(server), http, Links(None))
        await asyncio.gather(worker.submit(alert()), worker.submit(alert(status="resolved")))
        assert order == ["firing", "resolved"]
    finally:
        await server.stop()


def test_signature_recipe_detects_a_changed_body() -> None:
    header = sign("k", 1_800_000_000, b'{"a":1}')
    assert header == sign("k", 1_800_000_000, b'{"a":1}') and header != sign("k", 1_800_000_000, b'{"a":2}')
