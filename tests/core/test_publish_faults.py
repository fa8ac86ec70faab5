"""What a closer publishes survives a worker stopped at any await point of its publish path.

Each test stops a closer at one point, as kill -9 would: a send whose delivery never completes, a crash
right after the broker acknowledged (before the mark), a crash right after the mark (before the window is
forgotten). A second closer (another worker) then runs until it has published what was missing: every
aggregate and alert is delivered at least once, and a repeat has the same key and the same bytes.
Real Redis; the "broker" is a send whose deliveries the test controls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from test_windows import LATENESS, SIZE, T0, Clock, record, result

from streameval.alerts import AlertRule
from streameval.outputs import Publish, publish_all
from streameval.store import ResultStore
from streameval.windows import WindowCloser

RULE = AlertRule(
    name="low-mean", metric="mean_score", comparator="<", threshold=0.9, window=SIZE, cooldown_s=25
)


class Crash(Exception):
    """Where the test stops a worker (kill -9 in production: nothing after it runs)."""


class Broker:
    """A send whose deliveries resolve at once, or never (``hang``); keeps what was acknowledged."""

    def __init__(self, hang: bool = False) -> None:
        self.hang = hang
        self.acked: list[tuple[str, bytes | None, bytes]] = []

    async def __call__(self, message: Publish) -> asyncio.Future[None]:
        delivery: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.hang:
            self.acked.append((message.kind, message.key, message.value))
            delivery.set_result(None)
        return delivery


def closer(store: ResultStore, clock: Clock, name: str, lease_s: float = 30.0) -> WindowCloser:
    return WindowCloser(
        store, [RULE], allowed_lateness_s=LATENESS, lease_s=lease_s, worker_id=name, clock=clock.redis
    )


async def until_published(second: WindowCloser, broker: Broker, want: int) -> None:
    """Run the second worker's ticks until ``want`` windows went out (the first one's lease expires)."""
    loop = asyncio.get_running_loop()
    deadline, published = loop.time() + 20, 0
    while published < want:
        assert loop.time() < deadline, "the second worker never published the window"
        published += await second.run_once(broker)
        await asyncio.sleep(0.05)  # the next tick (the first worker's lease runs out meanwhile)


async def windows_with_alerts(store: ResultStore, clock: Clock) -> None:
    """One window, three models: every model's mean is 0.5 (an alert each)."""
    results = [
        await result(f"{m}-{i}", o, T0 + 1, model=m)
        for m in ("m1", "m2", "m3")
        for i, o in enumerate(("Paris", "Rome"))
    ]
    await record(store, *results)
    clock.now = T0 + SIZE + LATENESS


Stop = Callable[[WindowCloser], Awaitable[Any]]


async def hang_in_send(first: WindowCloser) -> None:
    # the broker never acknowledges: the tick is cut (the worker dies waiting)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(first.run_once(Broker(hang=True)), 0.5)


async def crash_after_ack(first: WindowCloser) -> list[tuple[str, bytes | None, bytes]]:
    broker = Broker()

    async def crash(claims: Any) -> None:
        raise Crash

    first._mark_sent = crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await first.run_once(broker)
    return broker.acked


async def crash_after_mark(first: WindowCloser) -> list[tuple[str, bytes | None, bytes]]:
    broker, mark = Broker(), first._mark_sent

    async def mark_then_crash(claims: Any) -> None:
        await mark(claims)
        raise Crash

    first._mark_sent = mark_then_crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await first.run_once(broker)
    return broker.acked


@pytest.mark.parametrize("stop", [hang_in_send, crash_after_ack, crash_after_mark], ids=lambda f: f.__name__)
async def test_a_window_stopped_anywhere_in_its_publish_path_is_published_by_the_next_worker(
    aredis: aioredis.Redis, prefix: str, stop: Stop
) -> None:
    clock = Clock(T0 + 1)
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), allowed_lateness_s=LATENESS, clock=clock)
    await windows_with_alerts(store, clock)
    first = closer(store, clock, "w1", lease_s=0.3)
    before = await stop(first) or []
    second, broker = closer(store, clock, "w2", lease_s=0.3), Broker()
    await until_published(second, broker, 1)
    delivered = before + broker.acked
    aggregates = {key: value for kind, key, value in delivered if kind == "aggregate"}
    alerts = {key: value for kind, key, value in delivered if kind == "alert"}
    assert sorted(k.split(b":")[:2] for k in aggregates) == [[m, b"qa"] for m in (b"m1", b"m2", b"m3")]
    window = f"low-mean:{SIZE}:2027-01-15T08:00:00.000Z"
    assert sorted(k.decode().rsplit(":", 1)[0] for k in alerts) == [
        f"{window}:{m}:qa" for m in ("m1", "m2", "m3")
    ]
    # a repeat is the same message: same key, same bytes
    for kind, key, value in delivered:
        assert value == (aggregates if kind == "aggregate" else alerts)[key]
    repeats = [key for kind, key, _ in delivered if kind == "alert"]
    if stop is crash_after_mark:  # marked sent: the next worker repeats the aggregates, never the alerts
        assert sorted(repeats) == sorted(alerts)
    if stop is crash_after_ack:  # acknowledged but not marked: sent again, the same alerts
        assert sorted(repeats) == sorted([*alerts, *alerts])
    assert await second.run_once(Broker()) == 0  # done now: nothing left, nothing again


async def test_a_dead_claim_never_stops_the_alert_and_its_retry_passes_the_cooldown(
    aredis: aioredis.Redis, prefix: str
) -> None:
    """The claim of an alert whose sender died before the acknowledgement: the retry sends it (the cooldown
    it took does not suppress it); once acknowledged and marked, no worker sends it again."""
    clock = Clock(T0 + 1)
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), allowed_lateness_s=LATENESS, clock=clock)
    await windows_with_alerts(store, clock)
    a, b = closer(store, clock, "w1"), closer(store, clock, "w2")
    taken: list[str] = []

    async def capture(claims: Any) -> None:
        taken.extend(claims)
        raise Crash

    a._mark_sent = capture  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await a._publish(SIZE, T0, clock.now, Broker())
    assert len(taken) == 3  # claimed and acknowledged, the worker died before marking them sent
    clock.now += 5  # within the rule's cooldown (25 s) of the first try
    again = Broker()
    await b._publish(SIZE, T0, clock.now, again)
    assert sum(kind == "alert" for kind, _, _ in again.acked) == 3
    thrice = Broker()
    await b._publish(SIZE, T0, clock.now, thrice)
    assert [kind for kind, _, _ in thrice.acked] == ["aggregate"] * 3


async def test_publish_all_sends_everything_before_waiting_and_raises_a_failed_delivery() -> None:
    order: list[str] = []
    deliveries: list[asyncio.Future[None]] = []

    async def send(message: Publish) -> asyncio.Future[None]:
        order.append(f"send {message.key!r}")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deliveries.append(future)
        return future

    task = asyncio.create_task(
        publish_all(send, [Publish("alert", b"a", b"{}"), Publish("alert", b"b", b"{}")])
    )
    while len(deliveries) < 2:
        await asyncio.sleep(0)
    assert order == ["send b'a'", "send b'b'"] and not task.done()  # both sent, waiting for both
    deliveries[1].set_result(None)
    await asyncio.sleep(0)
    assert not task.done()  # one acknowledgement is not enough
    deliveries[0].set_exception(ConnectionError("broker gone"))
    with pytest.raises(ConnectionError):
        await task
