"""The Faust app: one agent that wires ``evals.requests`` to :class:`streameval.processor.Processor`.

All logic lives in ``streameval`` (no Faust there; the parts are built by :mod:`streameval.runtime`);
this module only holds the agent loop, the timers and the consumer settings Faust needs.
No Faust Tables (Redis is the state store; Tansu's offsets cannot be trusted for a changelog,
docs/reliability.md), memory store, no transactions (Tansu has none; exactly-once results come from
idempotency in Redis).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import faust
from faust.sensors import Monitor
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.types import TP, EventT

from streameval import telemetry
from streameval.envelope import Source
from streameval.inflight import InFlight, StallWatchdog, batch_positions
from streameval.kafka_security import KafkaSecurity, bootstrap_hosts
from streameval.outputs import Publish, output_topics, publish_all
from streameval.processor import Emit, Processor
from streameval.runtime import Runtime
from streameval.settings import Settings
from streameval.store import Receipt

from .liveness import Lifeline

__all__ = ["QuietMonitor", "create_app", "faust_credentials"]

log = logging.getLogger(__name__)

# Batching (streameval.settings: batch_max, batch_wait_ms, batches_in_flight, fetch_wait_ms; the reasons
# and measurements are in docs/performance.md). Several batches are evaluated at once so a slow judge
# does not bound the worker at one batch per round trip; rule results go out at once, judged ones in order.


def faust_credentials(security: KafkaSecurity) -> Any:
    """``broker_credentials`` for :class:`faust.App` from the clients' security (None for plaintext)."""
    if security.protocol == "PLAINTEXT":
        return None
    context = security.ssl_context()
    if security.protocol == "SSL":
        return faust.SSLCredentials(context)
    if security.mechanism == "OAUTHBEARER":
        return faust.OAuthCredentials(oauth_cb=security.token_provider_instance(), ssl_context=context)
    return faust.SASLCredentials(
        username=security.username,
        password=security.password,
        ssl_context=context,
        mechanism=security.mechanism,
    )


def _consumer_class(fetch_max_wait_ms: int) -> type[AIOKafkaConsumer]:
    """Faust's aiokafka consumer with ``fetch_max_wait_ms`` (set on this app's transport only)."""

    class _ConsumerThread(AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read by AIOKafkaConsumer.start (its Fetcher)
            return consumer

    class _Consumer(AIOKafkaConsumer):
        def _new_consumer_thread(self) -> _ConsumerThread:
            return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    return _Consumer


class QuietMonitor(Monitor):
    """Faust's Monitor sensor without its per-message bookkeeping.

    The default Monitor updates several dicts and deques for every message in, every stream event and
    every send; measured, that is a fifth of a bare Faust consumer's CPU (docs/performance.md).
    Nothing reads those figures here (no Faust web views; our metrics are in streameval.telemetry).
    """

    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        pass

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        pass

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        pass

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> None:
        return None

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        pass


def _process(
    proc: Processor, batch: list[tuple[bytes, Source]], receipts: list[Receipt], emit: Emit
) -> Awaitable[list[Publish]]:
    """A taken batch's work for :meth:`InFlight.submit`: the batch is bound when taken, ``emit`` given later;
    ``receipts`` gets what its record calls kept (marked published once the batch is acked)."""
    return proc.process_batch(batch, emit=emit, receipts=receipts)


async def _closer_tick(what: str, failures: list[int], work: Awaitable[Any], timeout_s: float | None) -> None:
    """One tick of a closer (windows or sessions), recovered in place: a failure or a tick longer than
    ``timeout_s`` is logged (with its traceback the first time) and counted in ``failures[0]``; the next
    tick retries, and the first that succeeds logs that closing resumed."""
    try:
        await asyncio.wait_for(work, timeout=timeout_s)
    except Exception as exc:
        failures[0] += 1
        log.error(
            "closing %s failed (%d in a row; retrying at the next tick): %r",
            what,
            failures[0],
            exc,
            exc_info=failures[0] == 1,
        )
        return
    if failures[0]:
        log.warning("closing %s resumed after %d failed tick(s)", what, failures[0])
        failures[0] = 0


def create_app(
    settings: Settings,
    make_runtime: Callable[[], Awaitable[Runtime]],
    *,
    close_interval_s: float = 1.0,
    input_topics: Sequence[str] = (),
    lifeline: Lifeline | None = None,
) -> faust.App:
    """A Faust app for ``settings``; ``make_runtime`` (:meth:`Runtime.build`) is awaited once, in the worker's loop.

    The agent reads ``input_topics`` (the suite file's ``inputs:``; default: ``settings.topic_requests``);
    the processor picks each message's decoder by its topic. Every ``close_interval_s`` a timer publishes
    due windows and alerts (suite file ``windowing:``). Every output goes through one ``send``.
    A failure the worker cannot recover from in place goes to ``lifeline.fatal`` (the process exits
    non-zero, :mod:`streameval.agents.liveness`); every second a watchdog reports the oldest batch
    taken but not yet published (``/metrics``, ``/ready``, an error log past ``settings.stall_after_s``).
    """
    lifeline = lifeline if lifeline is not None else Lifeline(settings.shutdown_grace_s)
    # Faust makes "<app id>-data" in the working directory unless told otherwise, and needs it to exist
    datadir = settings.data_dir or os.path.join(tempfile.gettempdir(), "streameval-faust", settings.app_id)
    os.makedirs(datadir, exist_ok=True)
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{host}" for host in bootstrap_hosts(settings.kafka_bootstrap_servers)],
        broker_credentials=faust_credentials(
            KafkaSecurity.from_settings(settings)
        ),  # TLS, SASL (docs/security.md)
        store="memory://",
        value_serializer="raw",
        key_serializer="raw",
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication,
        broker_session_timeout=settings.broker_session_timeout,
        consumer_auto_offset_reset="earliest",
        processing_guarantee="at_least_once",
        producer_acks=-1,
        producer_max_request_size=settings.max_message_bytes,  # dead letters are sized under it
        # Faust's default is 1200 s: aiokafka keeps one produce request in flight per broker, so one lost
        # answer held every later result of the worker for 20 minutes (docs/reliability.md, "Stuck results")
        producer_request_timeout=settings.publish_timeout_s,
        producer_linger=0.005,  # batch produce requests: the agent sends a whole batch at once
        Monitor=QuietMonitor,
        web_enabled=False,
        datadir=datadir,
        autodiscover=False,
    )
    # Faust hard-codes the consumer's fetch_max_wait_ms to 1500, and Tansu holds a caught-up fetch for the
    # whole wait instead of answering when a record arrives: up to 1.5 s added to an idle-then-busy partition
    app.transport.Consumer = _consumer_class(settings.fetch_wait_ms)  # type: ignore[misc]  # faust types it a ClassVar
    raw: dict[str, Any] = {
        "key_type": bytes,
        "value_type": bytes,
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    requests = app.topic(*(input_topics or [settings.topic_requests]), **raw)
    names = output_topics(settings)  # the topics exist (streameval.runtime.prepare)
    state: dict[str, Runtime] = {}
    lock = asyncio.Lock()  # the agent and the timer both ask for the runtime first thing
    inflights: list[InFlight[EventT[bytes]]] = []  # the agent's, for the stall watchdog
    watchdog = StallWatchdog(settings.stall_after_s)
    closer_failures = [0]

    async def runtime() -> Runtime:
        async with lock:
            if "r" not in state:
                state["r"] = await make_runtime()
        return state["r"]

    async def send(message: Publish) -> Any:
        # the producer directly: Topic.send adds a FutureMessage, callbacks and a debug log line per
        # message (a fifth of the worker's CPU, docs/performance.md). Returns the delivery's future.
        return await app.producer.send(names[message.kind], message.key, message.value, None, None, None)

    def _highwater(topic: str, partition: int) -> int | None:
        try:
            return int(app.consumer.highwater(TP(topic, partition)))
        except Exception:  # no fetch answer for that partition yet: no figure rather than a wrong one
            return None

    @app.agent(requests, name="evaluate")
    async def evaluate(stream: faust.StreamT[bytes]) -> None:
        # Up to batches_in_flight x batch_max events are evaluated at once; rule results are sent at once,
        # judged ones in input order, and a batch is acked (in order) only once the broker has every message of it (streameval.inflight): offsets never
        # pass an unpublished result. Nothing escapes to Faust, which would restart the agent in place
        # (streameval.agents.liveness): a failure is fatal and the process exits non-zero.
        try:
            await _evaluate(stream)
        except asyncio.CancelledError:
            if app.should_stop or lifeline.stopping:
                raise  # a stop
            lifeline.fatal("the evaluating agent was cancelled while the worker was running")
        except BaseException as exc:
            lifeline.fatal("the evaluating agent failed", exc)
        else:
            if not (app.should_stop or lifeline.stopping):
                lifeline.fatal("the evaluating agent ended while the worker was running")

    async def _evaluate(stream: faust.StreamT[bytes]) -> None:
        built = await runtime()
        proc, lag = built.processor, built.lag

        async def ack(events: Sequence[EventT[bytes]]) -> None:
            for event in events:
                await stream.ack(event)

        def failed(exc: BaseException) -> None:
            lifeline.fatal("a batch could not be evaluated, recorded or published", exc)

        # bounded by events, not batches: a stream of small batches keeps its rule results flowing while
        # the judges of older batches answer (docs/guarantees.md)
        inflight: InFlight[EventT[bytes]] = InFlight(
            send, ack, max_events=settings.batches_in_flight * settings.batch_max, on_failure=failed
        )
        inflights.append(inflight)
        try:
            # faust.Stream has noack_take; faust's StreamT does not declare it
            async for events in stream.noack_take(  # type: ignore[attr-defined]
                settings.batch_max, within=settings.batch_wait_ms / 1000
            ):
                taken_at = time.monotonic()
                batch = [
                    (
                        bytes(e.message.value or b""),
                        Source(e.message.topic, e.message.partition, e.message.offset),
                    )
                    for e in events
                ]
                # process_batch never raises for a bad event (dead letters); it waits out Redis outages.
                # A batch that fails to evaluate, record or deliver calls `failed` (the process exits at once):
                # neither it nor any batch after it is acked.
                # results that need no judge go out as soon as they are recorded (emit); acks stay in order;
                # once the broker has all of a batch's results their stored copies go (published marks)
                receipts: list[Receipt] = []
                await inflight.submit(
                    list(events),
                    functools.partial(_process, proc, batch, receipts),
                    label=batch_positions(batch),
                    taken_at=taken_at,
                    after=functools.partial(proc.published, receipts),
                )
                lag.update(
                    telemetry.observe_lag(((s.topic, s.partition, s.offset) for _, s in batch), _highwater)
                )
        finally:
            inflights.remove(inflight)
            await inflight.close()

    if settings.label_join_ttl_s:  # human labels (docs/feedback.md): a second agent on the feedback topic
        labels_topic = app.topic(settings.topic_feedback, **raw)

        @app.agent(labels_topic, name="feedback")
        async def feedback(stream: faust.StreamT[bytes]) -> None:
            try:
                await _feedback(stream)
            except asyncio.CancelledError:
                if app.should_stop or lifeline.stopping:
                    raise
                lifeline.fatal("the feedback agent was cancelled while the worker was running")
            except BaseException as exc:
                lifeline.fatal("the feedback agent failed", exc)

        async def _feedback(stream: faust.StreamT[bytes]) -> None:
            # Labels are few: one batch at a time. A batch is acked once its dead letters are delivered; its
            # labels are in Redis by then (joined, or waiting for their results).
            worker = await runtime()
            async for events in stream.noack_take(settings.batch_max, within=settings.batch_wait_ms / 1000):  # type: ignore[attr-defined]
                batch = [
                    (
                        bytes(e.message.value or b""),
                        Source(e.message.topic, e.message.partition, e.message.offset),
                    )
                    for e in events
                ]
                await publish_all(send, await worker.process_feedback(batch))
                for event in events:
                    await stream.ack(event)

    @app.timer(1.0)  # type: ignore[untyped-decorator]
    async def stall_watchdog() -> None:
        watchdog.check([batch for inflight in inflights for batch in inflight.pending()])

    @app.timer(close_interval_s)  # type: ignore[untyped-decorator]
    async def close_windows() -> None:
        # every worker runs this; Redis claims make each window and alert publish once (streameval.windows)
        try:
            parts = await runtime()
        except Exception as exc:
            lifeline.fatal("starting the window closer failed", exc)
            return
        # Recovered in place: a failed or hung tick is retried at the next one (a window's lease makes a
        # half-done publish safe); the log says when it failed and when it resumed.
        await _closer_tick(
            "windows", closer_failures, parts.close_windows(send), parts.closer.lease_ms / 1000
        )

    session_failures = [0]

    @app.timer(close_interval_s)  # type: ignore[untyped-decorator]
    async def close_sessions() -> None:
        # every worker runs this; a lease per session makes each revision publish once (streameval.features.sessions)
        try:
            parts = await runtime()
        except Exception as exc:
            lifeline.fatal("starting the session closer failed", exc)
            return
        if parts.sessions is None:
            return
        # recovered in place like the window closer: the next tick retries, leases hold. Not bounded by the
        # lease: judging a session can take longer, and each closing keeps its own lease meanwhile (a tick cut
        # at the lease would drop every closing still being judged, again at every tick); each closing is
        # bounded on its own (streameval.features.sessions.closer.MAX_CLOSE_S)
        await _closer_tick("sessions", session_failures, parts.close_sessions(send), None)

    @app.on_before_shutdown.connect  # type: ignore[arg-type]  # mode's receiver type (NamedArg) matches no plain def
    async def _close(app: faust.App, **kwargs: Any) -> None:
        if "r" in state:
            await state.pop("r").close()

    return app
