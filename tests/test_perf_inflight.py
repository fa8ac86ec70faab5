"""streameval.inflight: batches overlap, publication stays in order, acks only after delivery."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.inflight import InFlight, PublishFailed
from streameval.processor import Publish


class Broker:
    """Records sends; each delivery completes when the test resolves it (or at once with ``auto``)."""

    def __init__(self, *, auto: bool = True) -> None:
        self.sent: list[bytes] = []
        self.deliveries: list[asyncio.Future[None]] = []
        self.auto = auto

    async def send(self, message: Publish) -> asyncio.Future[None]:
        self.sent.append(message.value)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.auto:
            done.set_result(None)
        self.deliveries.append(done)
        return done


def _messages(values: Sequence[int]) -> list[Publish]:
    return [Publish("result", None, str(v).encode()) for v in values]


async def _work(values: Sequence[int], delay: float | asyncio.Event) -> list[Publish]:
    if isinstance(delay, asyncio.Event):
        await delay.wait()
    else:
        await asyncio.sleep(delay)
    return _messages(values)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=0.003), min_size=1, max_size=12), st.integers(1, 5))
async def test_publication_follows_input_order_whatever_finishes_first(delays: list[float], limit: int) -> None:
    broker = Broker()
    acked: list[int] = []

    async def ack(events: Sequence[int]) -> None:
        acked.extend(events)

    inflight: InFlight[int] = InFlight(broker.send, ack, limit=limit)
    for n, delay in enumerate(delays):
        await inflight.submit([n], _work([2 * n, 2 * n + 1], delay))
    await inflight.drain()
    assert broker.sent == [str(v).encode() for v in range(2 * len(delays))]
    assert sorted(acked) == list(range(len(delays)))


async def test_batches_are_evaluated_concurrently() -> None:
    gates = [asyncio.Event() for _ in range(3)]
    started: list[int] = []

    async def work(n: int) -> list[Publish]:
        started.append(n)
        await gates[n].wait()
        return _messages([n])

    async def ack(events: Sequence[int]) -> None:
        pass

    broker = Broker()
    inflight: InFlight[int] = InFlight(broker.send, ack, limit=3)
    for n in range(3):
        await inflight.submit([n], work(n))
    for _ in range(10):
        await asyncio.sleep(0)
    assert started == [0, 1, 2]  # all three running before any finished
    for gate in reversed(gates):
        gate.set()
    await inflight.drain()
    assert broker.sent == [b"0", b"1", b"2"]


async def test_a_batch_is_acked_only_after_every_message_is_delivered() -> None:
    broker = Broker(auto=False)
    acked: list[str] = []

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    inflight: InFlight[str] = InFlight(broker.send, ack, limit=2)
    await inflight.submit(["a"], _work([1, 2], 0), label="batch a")
    await inflight.submit(["b"], _work([3], 0), label="batch b")
    deadline = asyncio.get_running_loop().time() + 5
    while len(broker.deliveries) < 3:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.001)
    broker.deliveries[2].set_result(None)  # batch b delivered first: not acked before a (in order)
    broker.deliveries[0].set_result(None)  # half of batch a: not yet
    for _ in range(20):
        await asyncio.sleep(0)
    assert acked == []
    assert [label for _, label in inflight.pending()] == ["batch a", "batch b"]
    broker.deliveries[1].set_result(None)
    await inflight.drain()
    assert acked == ["a", "b"]
    assert inflight.pending() == []


async def test_failed_delivery_is_never_acked_and_stops_the_consumer() -> None:
    broker = Broker(auto=False)
    acked: list[str] = []

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    failures: list[BaseException] = []
    inflight: InFlight[str] = InFlight(broker.send, ack, limit=2, on_failure=failures.append)
    await inflight.submit(["a"], _work([1], 0))
    await inflight.submit(["a2"], _work([2], 0))
    while len(broker.deliveries) < 2:
        await asyncio.sleep(0.001)
    broker.deliveries[1].set_result(None)  # the batch after the failed one is delivered, but never acked
    broker.deliveries[0].set_exception(ConnectionError("broker gone"))
    with pytest.raises(PublishFailed):
        await inflight.drain()
    assert [type(f) for f in failures] == [ConnectionError]  # told at once, not at the next submit
    with pytest.raises(PublishFailed):
        await inflight.submit(["b"], _work([2], 0))
    assert acked == []
    await inflight.close()


async def test_a_failing_evaluation_is_reported_at_once() -> None:
    failures: list[BaseException] = []

    async def ack(events: Sequence[str]) -> None:
        raise AssertionError("nothing may be acked")

    async def broken() -> list[Publish]:
        raise RuntimeError("evaluation bug")

    inflight: InFlight[str] = InFlight(Broker().send, ack, limit=2, on_failure=failures.append)
    await inflight.submit(["a"], broken())
    for _ in range(20):
        await asyncio.sleep(0)
    assert [str(f) for f in failures] == ["evaluation bug"]
    with pytest.raises(PublishFailed, match="evaluation bug"):
        inflight.check()
    await inflight.close()


async def test_submit_blocks_while_the_limit_is_waiting() -> None:
    gate = asyncio.Event()

    async def ack(events: Sequence[int]) -> None:
        pass

    inflight: InFlight[int] = InFlight(Broker().send, ack, limit=1)
    await inflight.submit([0], _work([0], gate))  # taken by the publisher, which waits on it
    await inflight.submit([1], _work([1], gate))  # fills the queue
    third = asyncio.ensure_future(inflight.submit([2], _work([2], gate)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not third.done()
    gate.set()
    await third
    await inflight.drain()
    await inflight.close()


def test_limit_must_be_positive() -> None:
    async def ack(events: Sequence[int]) -> None:
        pass

    with pytest.raises(ValueError):
        InFlight(Broker().send, ack, limit=0)


async def test_a_failing_evaluation_surfaces_instead_of_blocking_submit() -> None:
    async def ack(events: Sequence[int]) -> None:
        pass

    async def boom() -> list[Publish]:
        raise RuntimeError("evaluation bug")

    gate = asyncio.Event()
    inflight: InFlight[int] = InFlight(Broker().send, ack, limit=1)
    await inflight.submit([0], boom())
    with pytest.raises(RuntimeError, match="evaluation bug"):
        for n in range(1, 5):  # the queue fills; submit must not wait forever on a dead publisher
            await asyncio.wait_for(inflight.submit([n], _work([n], gate)), timeout=5)
    await inflight.close()
