"""``streameval worker``: validate config, create topics, connect Redis, run the Faust worker."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import faust

from streameval import keyspace
from streameval._util import redact_url
from streameval.alerts import check_alert_windows
from streameval.api import broker_check, create_web_app, load_api_settings, start_web
from streameval.api._ops import stall_check
from streameval.api._settings import ApiSettings
from streameval.config import parse_config_text, read_config_text
from streameval.connect_check import check_redis_settings
from streameval.deadletters import DeadLetterPolicy, RawStore
from streameval.errors import ConfigError
from streameval.evalpool import EvalPool
from streameval.inputs import Inputs, check_input_topics
from streameval.judges import JudgeCache, JudgeConfig, judge_ready_checks
from streameval.kafka_io import ensure_topics
from streameval.kafka_security import KafkaSecurity
from streameval.pipeline import Pipeline
from streameval.processor import Processor
from streameval.redis_security import redis_options
from streameval.registry import LiveRegistry, RegistryStore, bind_live_registry
from streameval.settings import Settings
from streameval.store import ResultStore, retry_forever

from .app import create_app
from .liveness import Lifeline, LifelineWorker

__all__ = ["make_faust_worker", "run_worker"]

log = logging.getLogger(__name__)

REDIS_CONNECTIONS = 64  # per worker process; the Redis server may be shared


def run_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT. Raises :class:`ConfigError` before touching the broker if misconfigured.

    Exits with 0 after a clean stop; ends the process with :data:`~streameval.agents.liveness.EXIT_FATAL`
    when a part of the worker failed for good (one CRITICAL log line names it), and with
    :data:`~streameval.agents.liveness.EXIT_GRACE_EXPIRED` when a stop takes longer than
    ``settings.shutdown_grace_s`` (:mod:`streameval.agents.liveness`).
    """
    if not settings.config:
        raise ConfigError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
    if not settings.redis_url:
        raise ConfigError("no Redis: set REDIS_URL (the worker keeps idempotency and aggregates there)")
    config_file = settings.config
    config_text = read_config_text(config_file)
    _, suites = parse_config_text(config_text, file=config_file)  # fail fast, with file and field path
    check_alert_windows(suites.alerts, settings.windows, file=settings.config)
    inputs = Inputs(suites.inputs, max_depth=settings.max_event_depth)
    input_topics = inputs.topics(settings.topic_requests)
    check_input_topics(suites.inputs, settings, file=config_file)
    api = load_api_settings()
    redis_url = settings.redis_url
    asyncio.run(check_redis_settings(redis_url, redis_options(settings)))  # a wrong password: one line, exit

    asyncio.run(
        ensure_topics(
            settings.kafka_bootstrap_servers,
            [*input_topics, settings.topic_results, settings.topic_deadletter,
             settings.topic_alerts, settings.topic_aggregates],
            partitions=settings.topic_partitions,
            replication=settings.topic_replication,
            security=KafkaSecurity.from_settings(settings),
        )
    )  # fmt: skip
    asyncio.run(keyspace.preflight(redis_url, **redis_options(settings)))  # a cluster behind redis:// fails here
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run closed its loop; Faust needs one

    async def make_processor() -> Processor:
        # Blocking pool: with batches in flight, thousands of judge-cache reads can be waiting at once;
        # they queue for one of the connections instead of failing with MaxConnectionsError (which
        # turned every cache read into a judge call, docs/performance.md).
        client = keyspace.connect(redis_url, max_connections=REDIS_CONNECTIONS, **redis_options(settings))  # or a cluster

        await retry_forever(lambda: keyspace.ping(client, redis_url), what="connecting to Redis")
        store = ResultStore.from_settings(client, settings, allowed_lateness_s=suites.windowing.allowed_lateness_s)
        pipeline = Pipeline(
            suites,
            max_event_bytes=settings.max_event_bytes,
            max_event_depth=settings.max_event_depth,
            judge_cache=JudgeCache(client, prefix=settings.redis_prefix),
        )
        # registered evaluators read this copy of the registry; it follows API changes live
        registry = LiveRegistry(RegistryStore(client, prefix=settings.redis_prefix, limits=api.registry_limits()),
                                resync_s=api.registry_resync_s)
        await retry_forever(registry.start, what="loading the evaluator registry")
        bind_live_registry(registry)

        async def close() -> None:
            bind_live_registry(None)
            await registry.close()
            await client.aclose()

        pool = None
        if settings.eval_processes:
            pool = EvalPool(config_text, config_file, settings.eval_processes,
                            max_event_bytes=settings.max_event_bytes, max_event_depth=settings.max_event_depth)  # fmt: skip
        raw_store = RawStore(client, prefix=settings.redis_prefix, ttl_s=settings.dead_letter_raw_ttl_s,
                             budget_bytes=settings.dead_letter_raw_budget_bytes)  # fmt: skip
        dead_letters = DeadLetterPolicy(max_bytes=settings.dead_letter_max_bytes, store=raw_store)
        processor = Processor(pipeline, store, on_close=close, pool=pool, inputs=inputs, dead_letters=dead_letters)
        await processor.start()
        log.info("streameval worker ready: %d suite(s), Redis %s", len(suites.all), redact_url(redis_url))
        return processor

    lifeline = Lifeline(settings.shutdown_grace_s)
    app = create_app(settings, make_processor, close_interval_s=suites.windowing.close_interval_s,
                     input_topics=input_topics, lifeline=lifeline)  # fmt: skip
    if api.web_port is not None:
        _serve_web(app, settings, api, [j for j in suites.judges if j.enabled])
    make_faust_worker(app, settings, lifeline).execute_from_commandline()


def make_faust_worker(app: faust.App, settings: Settings, lifeline: Lifeline | None = None) -> faust.Worker:
    lifeline = lifeline if lifeline is not None else Lifeline(settings.shutdown_grace_s)
    worker = LifelineWorker(app, lifeline, loglevel=settings.log_level, stdout=sys.stdout, stderr=sys.stderr)
    # Faust's start-up spinner, at log levels of warn and above, sets the root logger to DEBUG so that it
    # spins on every record: aiokafka then builds a debug record per message sent (~5 % of a worker's CPU,
    # docs/performance.md). A service's log is no terminal: no spinner.
    worker.spinner = None
    return worker


def _serve_web(app: faust.App, settings: Settings, api: ApiSettings, judges: list[JudgeConfig]) -> None:
    """Serve /health, /ready, /metrics and the API on ``api.web_port`` for the worker's lifetime."""
    assert settings.redis_url is not None and api.web_port is not None
    redis_url, port = settings.redis_url, api.web_port
    state: dict[str, Any] = {}

    @app.task  # type: ignore[untyped-decorator]
    async def _web() -> None:
        client = keyspace.connect(redis_url, max_connections=16, socket_timeout=5, connect_timeout=2,
                                  **redis_options(settings))  # fmt: skip
        token = api.token()
        checks = [broker_check(settings.kafka_bootstrap_servers, KafkaSecurity.from_settings(settings)),
                  stall_check(), *judge_ready_checks(judges)]  # an authenticated models listing per judge, cached
        web_app = create_web_app(client, prefix=settings.redis_prefix, token=token, checks=checks,
                                 ready_timeout_s=api.ready_timeout_s, windows=settings.windows,
                                 access=api.access(), registry_limits=api.registry_limits(),
                                 redelivery_ttl_s=settings.redelivery_ttl_s)  # fmt: skip
        state["runner"], state["client"] = await start_web(web_app, api.web_host, port), client
        log.info("worker web server on http://%s:%d", api.web_host, port)

    @app.on_before_shutdown.connect  # type: ignore[untyped-decorator]
    async def _stop_web(app: faust.App, **kwargs: Any) -> None:
        if "runner" in state:
            await state.pop("runner").cleanup()
            await state.pop("client").aclose()
