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
async def test_publication_follows_input_order_whatever_finishes_first(
    delays: list[float], limit: int
) -> None:
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


# -- early sends: results that need no judge go out before earlier batches' judged ones -------------
def _phased(
    early: Sequence[int], late: Sequence[int], gate: asyncio.Event, emitted: asyncio.Event | None = None
):  # type: ignore[no-untyped-def]
    """A batch's work as the worker submits it: ``early`` sent through ``emit`` at once, ``late`` after ``gate``."""

    async def work(emit) -> list[Publish]:  # type: ignore[no-untyped-def]
        if early:
            await emit(_messages(early))
        if emitted is not None:
            emitted.set()
        await gate.wait()
        return _messages(late)

    return work


def _set() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


async def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_early_messages_pass_earlier_batches_but_acks_stay_in_submission_order() -> None:
    broker = Broker()
    acked: list[str] = []

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    judge_a, judge_b = asyncio.Event(), asyncio.Event()
    inflight: InFlight[str] = InFlight(broker.send, ack, limit=4)
    await inflight.submit(["a"], _phased([1], [2], judge_a), label="a")  # 2 waits on a judge
    await inflight.submit(["b"], _phased([3, 4], [5], judge_b), label="b")
    await inflight.submit(["c"], _phased([6], [], _set()), label="c")  # c has no judged event
    await _until(lambda: len(broker.sent) == 4, "every early message sent")
    # every batch's rule results are out while batch a's judge is still pending
    assert broker.sent == [b"1", b"3", b"4", b"6"]
    for _ in range(50):
        await asyncio.sleep(0)
    assert acked == []  # nothing acked: a is not published, and acks follow submission order
    assert [label for _, label in inflight.pending()] == ["a", "b", "c"]  # the stall watchdog still sees a
    judge_b.set()  # b's judge answers first: its late message waits for a's turn, it is not acked before a
    for _ in range(50):
        await asyncio.sleep(0)
    assert broker.sent == [b"1", b"3", b"4", b"6"] and acked == []
    judge_a.set()
    await inflight.drain()
    assert broker.sent == [b"1", b"3", b"4", b"6", b"2", b"5"]
    assert acked == ["a", "b", "c"]
    assert inflight.pending() == []


async def test_a_batch_with_early_messages_is_acked_only_once_they_are_delivered() -> None:
    broker = Broker(auto=False)
    acked: list[str] = []

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    inflight: InFlight[str] = InFlight(broker.send, ack, limit=2)
    judged = asyncio.Event()
    judged.set()
    await inflight.submit(["a"], _phased([1], [2], judged))
    await _until(lambda: len(broker.deliveries) == 2, "both messages sent")
    broker.deliveries[1].set_result(None)  # the late message delivered, the early one not yet
    for _ in range(50):
        await asyncio.sleep(0)
    assert acked == []
    broker.deliveries[0].set_result(None)
    await inflight.drain()
    assert acked == ["a"]


async def test_a_failed_early_delivery_stops_everything_at_once() -> None:
    broker = Broker(auto=False)
    acked: list[str] = []
    failures: list[BaseException] = []

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    judge = asyncio.Event()  # never set: the failure must not wait for the batch's turn
    inflight: InFlight[str] = InFlight(broker.send, ack, limit=2, on_failure=failures.append)
    await inflight.submit(["a"], _phased([1], [2], judge))
    await _until(lambda: len(broker.deliveries) == 1, "the early message sent")
    broker.deliveries[0].set_exception(ConnectionError("broker gone"))
    await _until(lambda: failures, "the failure reported")
    assert [type(f) for f in failures] == [ConnectionError]
    with pytest.raises(PublishFailed):
        inflight.check()
    with pytest.raises(PublishFailed):
        await inflight.submit(["b"], _phased([3], [], judge))
    assert acked == []
    assert await inflight.close() == ["a"]  # never acked: redelivered to the partition's next owner


async def test_a_refused_early_send_fails_the_batch_and_nothing_later_is_acked() -> None:
    acked: list[str] = []
    failures: list[BaseException] = []
    sent: list[bytes] = []

    async def send(message: Publish) -> asyncio.Future[None]:
        if message.value == b"3":
            raise ValueError("message too large")
        sent.append(message.value)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def ack(events: Sequence[str]) -> None:
        acked.extend(events)

    gate = asyncio.Event()
    inflight: InFlight[str] = InFlight(send, ack, limit=3, on_failure=failures.append)
    await inflight.submit(["a"], _phased([1], [2], gate))
    await inflight.submit(["b"], _phased([3], [4], gate))  # its early send is refused
    await _until(lambda: failures, "the failure reported")
    gate.set()
    with pytest.raises(PublishFailed, match="message too large"):
        await inflight.drain()
    assert "b" not in acked and b"4" not in sent
    await inflight.close()


async def test_early_sends_do_not_lift_the_bound_on_batches_taken() -> None:
    """Intake slows while judges are slow: a batch whose rule results are all out still counts."""

    async def ack(events: Sequence[int]) -> None:
        pass

    judge = asyncio.Event()
    broker = Broker()
    inflight: InFlight[int] = InFlight(broker.send, ack, limit=1)
    await inflight.submit([0], _phased([0], [100], judge))  # taken by the publisher, waiting on its judge
    await inflight.submit([1], _phased([1], [], asyncio.Event()))  # fills the queue (rule results out)
    third = asyncio.ensure_future(inflight.submit([2], _phased([2], [], judge)))
    await _until(lambda: broker.sent[:2] == [b"0", b"1"], "the early messages sent")
    for _ in range(50):
        await asyncio.sleep(0)
    assert not third.done()  # bounded: at most limit + 1 batches taken and not published
    judge.set()
    await third
    await inflight.close()


async def test_the_bound_counts_events_so_small_batches_keep_flowing_behind_a_judged_one() -> None:
    acked: list[int] = []

    async def ack(events: Sequence[int]) -> None:
        acked.extend(events)

    judge = asyncio.Event()
    broker = Broker()
    inflight: InFlight[int] = InFlight(broker.send, ack, max_events=10)
    await inflight.submit([0, 1], _phased([0], [1], judge))  # its judge is slow
    for n in range(2, 10):  # eight one-event batches: far more batches than a count bound of 4 would take
        await asyncio.wait_for(inflight.submit([n], _phased([n], [], _set())), timeout=5)
    await _until(lambda: len(broker.sent) == 9, "every rule result sent")
    assert broker.sent == [str(n).encode() for n in [0, *range(2, 10)]]
    blocked = asyncio.ensure_future(inflight.submit([10, 11], _phased([10, 11], [], _set())))
    for _ in range(50):
        await asyncio.sleep(0)
    assert not blocked.done() and acked == []  # 10 events taken and unacked: the 11th and 12th wait
    judge.set()
    await blocked
    await inflight.drain()
    assert acked == list(range(12))  # in submission order
    assert len(broker.sent) == 12


async def test_a_batch_over_max_events_waits_until_nothing_else_is_unacked() -> None:
    async def ack(events: Sequence[int]) -> None:
        pass

    gate = asyncio.Event()
    inflight: InFlight[int] = InFlight(Broker().send, ack, max_events=3)
    await inflight.submit([0], _work([0], gate))
    big = asyncio.ensure_future(inflight.submit([1, 2, 3, 4, 5], _work([1], _set())))
    for _ in range(50):
        await asyncio.sleep(0)
    assert not big.done()
    gate.set()
    await asyncio.wait_for(big, timeout=5)
    await inflight.drain()


def test_a_bound_is_required() -> None:
    async def ack(events: Sequence[int]) -> None:
        pass

    with pytest.raises(ValueError):
        InFlight(Broker().send, ack)
    with pytest.raises(ValueError):
        InFlight(Broker().send, ack, max_events=0)


async def test_a_submit_waiting_for_room_raises_when_a_delivery_fails() -> None:
    async def ack(events: Sequence[int]) -> None:
        pass

    broker = Broker(auto=False)
    inflight: InFlight[int] = InFlight(broker.send, ack, max_events=2, on_failure=lambda exc: None)
    await inflight.submit([0, 1], _phased([0], [1], asyncio.Event()))  # never completes
    waiting = asyncio.ensure_future(inflight.submit([2], _phased([2], [], _set())))
    await _until(lambda: len(broker.deliveries) == 1, "the early message sent")
    assert not waiting.done()
    broker.deliveries[0].set_exception(ConnectionError("broker gone"))
    with pytest.raises(PublishFailed):
        await asyncio.wait_for(waiting, timeout=5)
    assert await inflight.close() == [0, 1]


async def test_after_runs_once_a_batch_is_delivered_and_acked_never_for_a_failed_one() -> None:
    broker = Broker(auto=False)
    order: list[str] = []

    async def ack(events: Sequence[int]) -> None:
        order.append(f"ack {events[0]}")

    inflight: InFlight[int] = InFlight(broker.send, ack, limit=4)
    await inflight.submit([0], _work([0], 0), after=lambda: order.append("after 0"))
    await inflight.submit([1], _work([1], 0), after=lambda: order.append("after 1"))
    for _ in range(100):
        if len(broker.deliveries) == 2:
            break
        await asyncio.sleep(0.001)
    assert order == []  # sent, not delivered: not marked
    broker.deliveries[0].set_result(None)
    broker.deliveries[1].set_exception(RuntimeError("refused"))
    with pytest.raises(PublishFailed):
        await inflight.drain()
    assert order == ["ack 0", "after 0"]
    await inflight.close()
