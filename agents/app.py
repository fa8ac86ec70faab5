"""The Faust app: one agent that wires ``evals.requests`` to :class:`streameval.processor.Processor`.

All logic lives in ``streameval`` (no Faust there); this module only builds topics and the agent.
No Faust Tables (Redis is the state store; see DESIGN.md on Tansu's ListOffsets), memory store,
no transactions (Tansu has none; exactly-once results come from idempotency in Redis).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from faust.types import TP

from streameval import telemetry
from streameval.api import remember_alert
from streameval.pipeline import Source
from streameval.processor import Processor
from streameval.settings import Settings
from streameval.windows import WindowCloser

__all__ = ["BATCH_MAX", "BATCH_WITHIN_S", "create_app"]

log = logging.getLogger(__name__)

BATCH_MAX = 256  # events evaluated and recorded together (one Redis round trip per batch)
BATCH_WITHIN_S = 0.05  # how long a partial batch waits for more events


def create_app(
    settings: Settings, make_processor: Callable[[], Awaitable[Processor]], *, close_interval_s: float = 1.0
) -> faust.App:
    """A Faust app for ``settings``; ``make_processor`` is awaited once, inside the worker's loop.

    Every ``close_interval_s`` a timer publishes due windows and alerts (suite file ``windowing:``).
    """
    # Faust makes "<app id>-data" in the working directory unless told otherwise, and needs it to exist
    datadir = settings.data_dir or os.path.join(tempfile.gettempdir(), "streameval-faust", settings.app_id)
    os.makedirs(datadir, exist_ok=True)
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap_servers.split(",")],
        store="memory://",
        value_serializer="raw",
        key_serializer="raw",
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication,
        broker_session_timeout=settings.broker_session_timeout,
        consumer_auto_offset_reset="earliest",
        processing_guarantee="at_least_once",
        producer_acks=-1,
        web_enabled=False,
        datadir=datadir,
        autodiscover=False,
    )
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    requests = app.topic(settings.topic_requests, **raw)
    topics = {
        "result": app.topic(settings.topic_results, **raw),
        "deadletter": app.topic(settings.topic_deadletter, **raw),
        "aggregate": app.topic(settings.topic_aggregates, **raw),
        "alert": app.topic(settings.topic_alerts, **raw),
    }
    state: dict[str, Processor] = {}
    lock = asyncio.Lock()  # the agent and the timer both ask for the processor first thing
    closers: list[WindowCloser] = []

    async def processor() -> Processor:
        async with lock:
            if "p" not in state:
                state["p"] = await make_processor()
        return state["p"]

    def _highwater(topic: str, partition: int) -> int | None:
        try:
            return int(app.consumer.highwater(TP(topic, partition)))
        except Exception:  # no fetch answer for that partition yet: no figure rather than a wrong one
            return None

    @app.agent(requests, name="evaluate")
    async def evaluate(stream: faust.StreamT[bytes]) -> None:
        proc = await processor()
        async for events in stream.take_events(BATCH_MAX, within=BATCH_WITHIN_S):
            batch = [
                (bytes(e.message.value or b""), Source(e.message.topic, e.message.partition, e.message.offset))
                for e in events
            ]
            # process_batch never raises for a bad event (dead letters); it waits out Redis outages.
            for message in await proc.process_batch(batch):
                await topics[message.kind].send(key=message.key, value=message.value)
            telemetry.observe_lag(((s.topic, s.partition, s.offset) for _, s in batch), _highwater)

    async def send(kind: str, key: bytes, value: bytes) -> None:
        await topics[kind].send(key=key, value=value)
        if kind == "alert":  # the dashboard's recent alerts (docs/api.md)
            store = state["p"].store
            await remember_alert(store.client, store.prefix, value)

    @app.timer(close_interval_s)  # type: ignore[untyped-decorator]
    async def close_windows() -> None:
        # every worker runs this; Redis claims make each window and alert publish once (streameval.windows)
        proc = await processor()
        if not closers:
            windowing = proc.pipeline.suites.windowing
            closers.append(WindowCloser(proc.store, proc.pipeline.suites.alerts,
                                        allowed_lateness_s=windowing.allowed_lateness_s,
                                        lease_s=windowing.lease_s))  # fmt: skip
        try:
            await proc.close_windows(closers[0], send)
        except Exception:  # a Redis hiccup must not stop the timer; the next tick retries
            log.exception("closing windows failed; retrying at the next tick")

    @app.on_before_shutdown.connect  # type: ignore[untyped-decorator]
    async def _close(app: faust.App, **kwargs: Any) -> None:
        if "p" in state:
            await state.pop("p").close()

    return app
