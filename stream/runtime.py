"""The stream worker's composition root, free of Faust: its parts built from settings and a suite file.

``streameval worker`` (the Faust adapter, :mod:`streameval.agents`) calls, in order:

1. :func:`load_worker_config`: read and check the suite file and settings (a :class:`ConfigError`
   names the file and field before anything connects);
2. :func:`prepare`: check the Redis credentials, create the input and output topics
   (:mod:`streameval.outputs`), refuse a cluster behind ``redis://``;
3. :meth:`Runtime.build`, once inside the worker's event loop: the Redis client, the store, the
   pipeline, the evaluator registry, the :class:`~streameval.processor.Processor` and the
   :class:`~streameval.windows.WindowCloser`.

Then its consumer loop hands each batch to ``runtime.processor.process_batch`` and every
``close_interval_s`` calls :meth:`Runtime.close_windows`; both publish through one
:data:`~streameval.outputs.Send`. A test or another consumer loop can do the same without Faust.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiohttp import web

from . import keyspace
from ._util import redact_url
from .alerts import check_alert_windows
from .api import (
    ApiSettings,
    broker_check,
    create_web_app,
    load_api_settings,
    remember_alert,
    stall_check,
    start_web,
)
from .config import (
    LoadedConfig,
    add_shadow_file,
    parse_config_text,
    read_config_text,
    redaction,
    shadow_routings,
)
from .connect_check import check_redis_settings
from .deadletters import DeadLetterPolicy, RawStore
from .envelope import Source
from .errors import ConfigError
from .evalpool import EvalPool
from .features.drilldown import ExamplesRecorder
from .features.guard import guard_section
from .features.guard._serve import build_guard
from .features.guard._web import guard_feature
from .features.labels import FeedbackDecoder, LabelIntake, LabelStore
from .features.review_page.web import open_review_feature, review_page_on
from .features.sessions.closer import SessionCloser
from .features.sessions.state import SessionStore, session_terms
from .features.setup import (
    alert_examples,
    annotators,
    batch_steps,
    enabled,
    record_plugins,
    session_review,
    slice_annotators,
    window_steps,
)
from .features.web import dashboard_features
from .inputs import Inputs, check_input_topics
from .judges import JudgeCache, judge_ready_checks
from .kafka_io import ensure_topics
from .kafka_security import KafkaSecurity
from .keyspace import Client
from .outputs import Publish, Send, output_topics
from .pipeline import Pipeline
from .processor import Processor
from .redis_security import redis_options
from .registry import LiveRegistry, RegistryStore, bind_live_registry
from .settings import Settings
from .signals import ConsumerLag
from .store import ResultStore, retry_forever
from .versionstore import VersionInfo, register_versions
from .windows import WindowCloser

__all__ = [
    "REDIS_CONNECTIONS",
    "Runtime",
    "WebServer",
    "WorkerConfig",
    "load_worker_config",
    "open_store",
    "prepare",
    "serve_web",
]

log = logging.getLogger(__name__)

REDIS_CONNECTIONS = 64  # per worker process; the Redis server may be shared


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker runs, checked: settings, the suite file (text and parsed), its inputs, the API settings."""

    settings: Settings
    config_file: str
    config_text: str
    suites: LoadedConfig
    inputs: Inputs
    input_topics: list[str]
    api: ApiSettings

    @property
    def redis_url(self) -> str:
        assert self.settings.redis_url is not None  # load_worker_config checked it
        return self.settings.redis_url


def load_worker_config(settings: Settings) -> WorkerConfig:
    """Read and check everything a worker needs from ``settings``; raises :class:`ConfigError` first."""
    if not settings.config:
        raise ConfigError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
    if not settings.redis_url:
        raise ConfigError("no Redis: set REDIS_URL (the worker keeps idempotency and aggregates there)")
    config_file = settings.config
    config_text = read_config_text(config_file)
    _, suites = parse_config_text(config_text, file=config_file)  # fail fast, with file and field path
    if settings.shadow:
        add_shadow_file(suites, settings.shadow, sample_rate=settings.shadow_sample)
    check_alert_windows(suites.alerts, settings.windows, file=config_file)
    inputs = Inputs(suites.inputs, max_depth=settings.max_event_depth, steps=suites.assembles_spans)
    input_topics = inputs.topics(settings.topic_requests)
    check_input_topics(suites.inputs, settings, file=config_file)
    # the label join, left unset, follows the suite file (streameval.features.setup): resolved once here, as
    # it decides an input topic and an agent; the store resolves the other features' settings itself
    settings = settings.model_copy(update={"label_join_ttl_s": enabled(settings, suites).label_join_ttl_s})
    return WorkerConfig(settings, config_file, config_text, suites, inputs, input_topics, load_api_settings())


async def prepare(config: WorkerConfig) -> None:
    """Before the consumer starts: Redis credentials, the topics (inputs and every output), the Redis mode."""
    settings = config.settings
    await check_redis_settings(config.redis_url, redis_options(settings))  # a wrong password: one line, exit
    await ensure_topics(
        settings.kafka_bootstrap_servers,
        [
            *config.input_topics,
            *output_topics(settings).values(),
            *([settings.topic_feedback] if settings.label_join_ttl_s else []),
        ],
        partitions=settings.topic_partitions,
        replication=settings.topic_replication,
        security=KafkaSecurity.from_settings(settings),
    )
    await keyspace.preflight(
        config.redis_url, **redis_options(settings)
    )  # a cluster behind redis:// fails here


def open_store(
    client: Client,
    settings: Settings,
    *,
    allowed_lateness_s: float,
    suites: LoadedConfig | None = None,
    labels: LabelStore | None = None,
    backfill: bool = False,
) -> ResultStore:
    """The worker's :class:`ResultStore` on ``client``, as the settings and the suite file say, with the recorders
    of the features they turn on (streameval.features.setup; ``labels``: the label join's store, when on)."""
    on = enabled(settings, suites, backfill=backfill)
    return ResultStore(
        client,
        prefix=settings.redis_prefix,
        windows=settings.windows,
        window_ttl_s=settings.window_ttl_s,
        seen_ttl_s=settings.seen_ttl_s,
        redelivery_ttl_s=settings.redelivery_ttl_s,
        all_time_ttl_s=settings.all_time_ttl_s,
        max_pairs=settings.max_pairs,
        allowed_lateness_s=allowed_lateness_s,
        wait_replicas=settings.redis_wait_replicas,
        wait_timeout_ms=settings.redis_wait_timeout_ms,
        recorders=record_plugins(on, labels),
        linger_s=settings.record_linger_ms / 1000,
    )


class Runtime:
    """A running worker's parts: the processor, the window closer and the alert side effects."""

    def __init__(
        self,
        processor: Processor,
        closer: WindowCloser,
        lag: ConsumerLag | None = None,
        sessions: SessionCloser | None = None,
        labels: LabelIntake | None = None,
    ) -> None:
        self.processor = processor
        self.closer = closer
        self.lag = lag if lag is not None else ConsumerLag()  # the agent updates it after each batch
        self.sessions = sessions  # None when the suite file has no sessions
        self.labels = labels  # the human-label join (docs/feedback.md); None: the feedback topic is not read

    @classmethod
    async def build(cls, config: WorkerConfig) -> Runtime:
        """Connect Redis (waiting while it is down), load the registry, start the processor."""
        settings, suites, redis_url = config.settings, config.suites, config.redis_url
        # Blocking pool: with batches in flight, thousands of judge-cache reads can be waiting at once;
        # they queue for one of the connections instead of failing with MaxConnectionsError (which
        # turned every cache read into a judge call, docs/performance.md).
        client = keyspace.connect(
            redis_url, max_connections=REDIS_CONNECTIONS, **redis_options(settings)
        )  # or a cluster

        await retry_forever(lambda: keyspace.ping(client, redis_url), what="connecting to Redis")
        lag = ConsumerLag()
        labels = None
        if settings.label_join_ttl_s:  # human labels joined on the stream (docs/feedback.md)
            labels = LabelStore(
                client,
                keyspace.Keys(settings.redis_prefix),
                join_ttl_s=settings.label_join_ttl_s,
                buckets=settings.label_join_buckets,
                wait_s=settings.label_wait_s,
                max_pending=settings.label_max_pending,
                max_rows=settings.label_max_rows,
                windows=settings.windows,
                window_ttl_s=settings.window_ttl_s,
                all_time_ttl_s=settings.all_time_ttl_s,
                clock=lambda: store.now(),
            )
        # with the recorders of the features the suite file turns on (their Redis work joins the record call)
        store = open_store(
            client,
            settings,
            allowed_lateness_s=suites.windowing.allowed_lateness_s,
            suites=suites,
            labels=labels,
        )
        pipeline = Pipeline(
            suites,
            max_event_bytes=settings.max_event_bytes,
            max_event_depth=settings.max_event_depth,
            judge_cache=JudgeCache(client, prefix=settings.redis_prefix),
            lag=lag.total,  # judges' backpressure (the agent updates it)
            # the sessions' turns and embedding drift's vectors, when the suite file turns them on
            annotators=annotators(suites, embed_outputs=True),
        )
        if pipeline.redactors is not None:  # drill-down examples' texts redacted (docs/redact.md)
            for recorder in store.recorders:
                if isinstance(recorder, ExamplesRecorder):
                    recorder.redact = pipeline.redactors.result
        # registered evaluators read this copy of the registry; it follows API changes live
        api = config.api
        registry = LiveRegistry(
            RegistryStore(client, prefix=settings.redis_prefix, limits=api.registry_limits()),
            resync_s=api.registry_resync_s,
        )
        live_versions: dict[str, str] = {}

        def follow_registry(
            current: LiveRegistry,
        ) -> None:  # a registered step's new version: a new suite version
            changed = suites.resolve_registry(current.versions())
            live_versions.update({s.name: s.version for s in suites.all})
            if changed and registered_once:
                log.info(
                    "registry change: new versions of %s",
                    ", ".join(f"{n} {suites.by_name[n].version}" for n in changed),
                )
                task = asyncio.ensure_future(
                    register_versions(
                        client,
                        store.keys,
                        version_infos(suites, changed),
                        run="live",
                        file=config.config_file,
                    )
                )
                task.add_done_callback(_log_failure)

        registered_once = False
        registry.listeners.append(follow_registry)
        await retry_forever(registry.start, what="loading the evaluator registry")
        bind_live_registry(registry)
        # labels and current versions (a label reused with another definition: ConfigError, exit 2)
        await retry_forever(
            lambda: register_versions(
                client, store.keys, version_infos(suites), run="live", file=config.config_file
            ),
            what="recording suite versions",
        )
        shadow_infos = [
            VersionInfo(s.suite.name, s.suite.version, s.suite.label, s.suite.definition)
            for suite in suites.all
            for s in suite.shadows
        ]
        await retry_forever(
            lambda: register_versions(
                client, store.keys, shadow_infos, run="shadow", file=settings.shadow or config.config_file
            ),
            what="recording shadow versions",
        )
        # shadows: same events, own versions and figures, results marked shadow: true, a judge budget of their own
        shadows = shadow_pipelines(suites, settings, client)
        registered_once = True
        for suite in suites.all:
            log.info(
                "suite %s: version %s%s",
                suite.name,
                suite.version,
                f" ({suite.label})" if suite.label else "",
            )
            for shadow in suite.shadows:
                log.info(
                    "suite %s: shadow version %s, sample %g",
                    suite.name,
                    shadow.suite.version,
                    shadow.sample_rate,
                )

        async def close() -> None:
            bind_live_registry(None)
            await registry.close()
            await client.aclose()

        pool = None
        if settings.eval_processes:
            pool = EvalPool(
                config.config_text,
                config.config_file,
                settings.eval_processes,
                max_event_bytes=settings.max_event_bytes,
                max_event_depth=settings.max_event_depth,
                annotate=partial(annotators, embed_outputs=True),  # as the pipeline's
            )
        raw_store = RawStore(
            client,
            prefix=settings.redis_prefix,
            ttl_s=settings.dead_letter_raw_ttl_s,
            budget_bytes=settings.dead_letter_raw_budget_bytes,
        )
        dead_letters = DeadLetterPolicy(max_bytes=settings.dead_letter_max_bytes, store=raw_store)
        windowing = suites.windowing
        session_state = None
        if suites.sessions:
            terms = session_terms(suites.sessions, windowing.allowed_lateness_s)
            session_state = SessionStore(
                client,
                terms,
                prefix=settings.redis_prefix,
                lease_s=windowing.lease_s,
                worker_id=f"{os.getpid()}-{uuid.uuid4().hex[:8]}",
                shards=settings.session_shards,
            )
        # the features' steps after each record call (streameval.feature.BatchStep)
        steps = batch_steps(client, store, suites, session_state, pipeline.redactors)
        intake = None
        if labels is not None:  # the feedback topic's labels joined; the waiting ones retried periodically
            decoder = FeedbackDecoder(suites.feedback, max_depth=settings.max_event_depth)
            redact = pipeline.redactors.letter if pipeline.redactors is not None else None
            intake = LabelIntake(labels, decoder, dead_letters, store.now, redact)
        processor = Processor(
            pipeline,
            store,
            on_close=close,
            pool=pool,
            inputs=config.inputs,
            dead_letters=dead_letters,
            steps=steps,
            periodic=[intake] if intake is not None else [],
            shadows=shadows,
        )
        await processor.start()
        closer = WindowCloser(
            store,
            suites.alerts,
            allowed_lateness_s=windowing.allowed_lateness_s,
            lease_s=windowing.lease_s,
            live_versions=live_versions,
            # the steps of the features the suite file turns on (score shift, embedding drift, the label
            # join's agreement, the notifier's resolves), and the drill-down examples' ids when kept
            steps=window_steps(suites, settings.windows, labels),
            examples=alert_examples(enabled(settings, suites)),
        )
        sessions = (
            None
            if session_state is None
            else SessionCloser(session_state, store, pipeline, suites.sessions, review=session_review(steps))
        )
        log.info(
            "streameval worker ready: %d suite(s), %d session(s), Redis %s",
            len(suites.all),
            len(suites.sessions),
            redact_url(redis_url),
        )
        return cls(processor, closer, lag, sessions, intake)

    async def process_feedback(self, messages: Sequence[tuple[bytes, Source]]) -> list[Publish]:
        """Join a batch of the feedback topic's messages to their verdicts (streameval.features.labels,
        ``LabelIntake.feedback``): the dead letters to publish."""
        if self.labels is None:
            raise RuntimeError(
                "the label join is off (STREAMEVAL_LABEL_JOIN_TTL_S=0, or unset with no feedback:, review: or "
                "human_agreement alert in the suite file): the feedback topic is not read"
            )
        return await self.labels.feedback(messages)

    async def close_sessions(self, send: Send) -> int:
        """Close due sessions and publish their results through ``send`` (streameval.features.sessions.closer).
        Returns how many this worker published; errors propagate (the next tick retries; leases hold)."""
        if self.sessions is None:
            return 0
        return await self.sessions.run_once(send)

    async def close_windows(self, send: Send) -> int:
        """Publish due windows and their alerts through ``send``; keep each alert for the dashboard.

        Returns how many windows this worker published. Errors propagate (the caller retries at its
        next tick; a window's lease makes a half-done publish safe, :mod:`streameval.windows`).
        """
        store = self.processor.store

        async def remembered(delivery: Any, alert: bytes) -> None:
            if delivery is not None:
                await delivery
            await remember_alert(store.client, store.prefix, alert)  # once it is on its topic

        async def publish(message: Publish) -> Any:
            delivery = await send(message)
            if message.kind == "alert":  # the dashboard's recent alerts (docs/api.md)
                return remembered(delivery, message.value)
            return delivery

        return await self.processor.close_windows(self.closer, publish)

    async def close(self) -> None:
        await self.processor.close()


def shadow_pipelines(suites: LoadedConfig, settings: Settings, client: Client) -> list[Pipeline]:
    """The pipelines of the suites' shadow versions (docs/versions.md): same events, own versions, results
    marked ``shadow: true``, a judge budget of their own; their windows keep their slices (``segments:``)."""
    return [
        Pipeline(
            routing,
            max_event_bytes=settings.max_event_bytes,
            max_event_depth=settings.max_event_depth,
            judge_cache=JudgeCache(client, prefix=settings.redis_prefix),
            result_marks={"shadow": True},
            judge_budget_scope="~shadow",
            annotators=slice_annotators(suites),
        )
        for routing in shadow_routings(suites)
    ]


def version_infos(suites: LoadedConfig, names: Collection[str] | None = None) -> list[VersionInfo]:
    """The versions of the suites and sessions (those named in ``names``, else all) as :func:`register_versions`
    takes them."""
    return [
        VersionInfo(s.name, s.version, s.label, s.definition)
        for s in suites.scoring
        if names is None or s.name in names
    ]


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("recording new suite versions failed: %s", task.exception())


@dataclass
class WebServer:
    """The worker's web server (/health, /ready, /metrics and the API); ``await close()`` stops it."""

    runner: web.AppRunner
    client: Client

    async def close(self) -> None:
        await self.runner.cleanup()
        await self.client.aclose()


async def serve_web(config: WorkerConfig) -> WebServer:
    """Serve /health, /ready, /metrics and the API on ``config.api.web_port`` (set) in the running loop."""
    settings, api = config.settings, config.api
    assert api.web_port is not None
    client = keyspace.connect(
        config.redis_url, max_connections=16, socket_timeout=5, connect_timeout=2, **redis_options(settings)
    )
    judges = [j for j in config.suites.judges if j.enabled]
    checks = [
        broker_check(settings.kafka_bootstrap_servers, KafkaSecurity.from_settings(settings)),
        stall_check(),
        *judge_ready_checks(judges),
    ]  # an authenticated models listing per judge, cached
    redactors = redaction(config.suites)  # a result's texts as the drill-down examples show them
    guarded = []  # POST /api/v1/check, when the suite file has a guard: section (docs/guard.md)
    if any(guard_section(s) is not None for s in config.suites.all):
        guard = build_guard(config.suites, settings, api)
        await guard.start()
        guarded.append(guard_feature(guard, api.guard_identities()))
    web_app = create_web_app(
        client,
        prefix=settings.redis_prefix,
        token=api.token(),
        checks=checks,
        ready_timeout_s=api.ready_timeout_s,
        windows=settings.windows,
        access=api.access(),
        registry_limits=api.registry_limits(),
        redelivery_ttl_s=settings.redelivery_ttl_s,
        identities=api.identities(),
        redact_result=redactors.result_document if redactors is not None else None,
        features=[
            *dashboard_features(settings.compare_ttl_s),
            *(
                [open_review_feature(client, settings, config.suites.review)]
                if review_page_on(api.review_page, config.suites.review, worker=True)
                else []
            ),
            *guarded,
        ],
    )
    runner = await start_web(web_app, api.web_host, api.web_port)
    log.info("worker web server on http://%s:%d", api.web_host, api.web_port)
    return WebServer(runner, client)
