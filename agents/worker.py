"""``streameval worker``: validate config, create topics, connect Redis, run the Faust worker."""

from __future__ import annotations

import asyncio
import logging
import sys

import faust
import redis.asyncio as aioredis

from streameval._util import redact_url
from streameval.alerts import check_alert_windows
from streameval.config import load_config
from streameval.errors import ConfigError, StoreUnavailable
from streameval.judges import JudgeCache
from streameval.kafka_io import ensure_topics
from streameval.pipeline import Pipeline
from streameval.processor import Processor
from streameval.settings import Settings
from streameval.store import ResultStore, retry_forever

from .app import create_app

__all__ = ["run_worker"]

log = logging.getLogger(__name__)


def run_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT. Raises :class:`ConfigError` before touching the broker if misconfigured."""
    if not settings.config:
        raise ConfigError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
    if not settings.redis_url:
        raise ConfigError("no Redis: set REDIS_URL (the worker keeps idempotency and aggregates there)")
    _, suites = load_config(settings.config)  # fail fast, with file and field path
    check_alert_windows(suites.alerts, settings.windows, file=settings.config)
    redis_url = settings.redis_url

    asyncio.run(
        ensure_topics(
            settings.kafka_bootstrap_servers,
            [settings.topic_requests, settings.topic_results, settings.topic_deadletter,
             settings.topic_alerts, settings.topic_aggregates],
            partitions=settings.topic_partitions,
            replication=settings.topic_replication,
        )
    )  # fmt: skip
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run closed its loop; Faust needs one

    async def make_processor() -> Processor:
        client = aioredis.Redis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)

        async def ping() -> object:
            try:
                return await client.ping()
            except (OSError, aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                raise StoreUnavailable(f"Redis at {redact_url(redis_url)} did not answer: {exc}") from exc

        await retry_forever(ping, what="connecting to Redis")
        store = ResultStore(
            client,
            prefix=settings.redis_prefix,
            windows=settings.windows,
            window_ttl_s=settings.window_ttl_s,
            seen_ttl_s=settings.seen_ttl_s,
            allowed_lateness_s=suites.windowing.allowed_lateness_s,
        )
        pipeline = Pipeline(
            suites,
            max_event_bytes=settings.max_event_bytes,
            judge_cache=JudgeCache(client, prefix=settings.redis_prefix),
        )
        processor = Processor(pipeline, store, on_close=client.aclose)
        await processor.start()
        log.info("streameval worker ready: %d suite(s), Redis %s", len(suites.all), redact_url(redis_url))
        return processor

    app = create_app(settings, make_processor, close_interval_s=suites.windowing.close_interval_s)
    worker = faust.Worker(app, loglevel=settings.log_level, stdout=sys.stdout, stderr=sys.stderr)
    worker.execute_from_commandline()
