"""``streameval backfill``: re-read the request topics from a time and evaluate with a suite version.

The retained requests on Kafka are replayed through a suite file's version (docs/versions.md):

* its own consumer group (``{app_id}.backfill.{hash}``, the hash of the versions, ``--from``, ``--to`` and
  ``--sample``): running the same command again resumes from the committed offsets (after Ctrl-C or a
  crash); each batch's offsets are committed only once its results are recorded and published;
* the start: ``offsets_for_times(--from)`` taken as a lower bound, then records older than ``--from`` by
  their own timestamp are skipped (the embedded broker answers offset 0 for every time; Apache Kafka the
  right offset; with the skip both are correct); records at or after ``--to`` are skipped too;
* the end: the end offsets taken at the first start (kept in Redis, ``P{versions}:bf:{group}``), so a
  resumed run stops where the first one would have;
* results are published marked ``backfill: true`` (to ``--output-topic``, default the results topic) and
  recorded under the version's own pairs by event time (an event without a timestamp: its record's
  timestamp). The backfill's windows are not handed to the window closer (no aggregates, no alerts are
  published for them); the API and dashboard read their figures. Each topic is decoded by its format of
  the suite file's ``inputs:`` (native, json with a field map, OTLP spans), as the worker does. Requests
  that cannot be decoded or evaluated, or are outside ``--sample``, are counted and dropped: the live worker
  has dead-lettered the bad ones already;
* it refuses a version that live workers run (its marks and figures are the live version's);
* judges have a budget of their own (scope ``~backfill``); ``--max-cost`` stops the run (resumable) once
  the judge cost so far reaches it;
* offsets removed by the topic's retention before they were read are counted and reported.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .config import LoadedConfig, Suite
from .errors import ConfigError, EventError, UnroutableEvent
from .features.sessions.closer import content_of
from .features.sessions.local import LocalSessions
from .features.sessions.turns import turns_in
from .features.setup import annotators
from .inputs import Inputs
from .judges import JudgeCache, sampled
from .kafka_io import _servers, _start
from .kafka_security import KafkaSecurity
from .keyspace import Client, guard
from .models import RequestEvent, encode_result
from .pipeline import Pipeline, Source
from .redis_client import connect
from .redis_security import redis_options
from .runtime import open_store
from .settings import Settings
from .store import PUBLISHED, Receipt, ResultStore
from .store_codec import as_text
from .versioning import definition_hash
from .versionstore import VersionInfo, register_versions

__all__ = ["BackfillPlan", "BackfillReport", "backfill_group", "plan_backfill", "run_backfill"]

log = logging.getLogger(__name__)

#: the backfill store's allowed lateness: every replayed event counts in its own event-time window
_NO_LATENESS_LIMIT_S = 100 * 365 * 86400.0


class SampledSuites(LoadedConfig):
    """The suites, routed as configured, keeping the ``rate`` share of events by event-id hash."""

    def __init__(self, suites: LoadedConfig, rate: float) -> None:
        super().__init__(suites.all, suites.judges, (), suites.windowing, suites.inputs, suites.sessions)
        self.inner = suites
        self.rate = rate

    def route(self, event: RequestEvent) -> Suite:
        if not sampled("backfill:" + event.id, self.rate):
            raise UnroutableEvent("not in the backfill's sample", kind="no_suite", event_id=event.id)
        return self.inner.route(event)


def backfill_group(
    app_id: str, suites: LoadedConfig, since_ms: int, until_ms: int | None, sample: float
) -> str:
    """The consumer group of a backfill: the same command (same versions, range, sample) resumes it."""
    versions = sorted((s.name, s.version) for s in suites.scoring)  # the suites' and the sessions'
    key = definition_hash({"versions": versions, "from": since_ms, "to": until_ms, "sample": sample})
    return f"{app_id}.backfill.{key}"


@dataclass
class BackfillPlan:
    """Where a backfill starts and ends per partition, and what retention removed."""

    group: str
    partitions: list[TopicPartition]
    start: dict[TopicPartition, int]
    end: dict[TopicPartition, int]
    lost: int = 0  # offsets removed by retention before they were read
    resumed: bool = False

    @property
    def offsets(self) -> int:
        return sum(max(0, self.end[tp] - self.start[tp]) for tp in self.partitions)


@dataclass
class BackfillReport:
    """What a backfill (or a dry run) did."""

    group: str
    offsets: int = 0  # offsets read
    in_range: int = 0  # records within [--from, --to)
    results: int = 0  # results recorded and published
    counted: int = 0  # of which counted for the first time (not replays of an earlier interrupted run)
    sessions: int = 0  # session results recorded and published (sessions: judged once the range is read)
    sessions_counted: int = 0  # of which counted for the first time
    unsampled: int = 0
    dropped: int = 0  # requests that could not be evaluated (the live worker dead-lettered them)
    cost: float = 0.0
    estimated_cost: float | None = None
    lost: int = 0
    stopped: str = "end"  # end | max_cost
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)


async def plan_backfill(
    consumer: AIOKafkaConsumer,
    client: Client,
    keys_prefix: str,
    group: str,
    topics: Sequence[str],
    since_ms: int,
) -> BackfillPlan:
    """Assign every partition of ``topics``; the end offsets of the first start (kept in Redis), and the
    start: the committed offset (a resumed run) or ``offsets_for_times`` as a lower bound."""
    partitions: list[TopicPartition] = []
    for topic in topics:
        found = consumer.partitions_for_topic(topic)
        if not found:
            await consumer._client.force_metadata_update()
            found = consumer.partitions_for_topic(topic) or set()
        partitions += [TopicPartition(topic, p) for p in sorted(found)]
    if not partitions:
        raise ConfigError(f"no partitions found for {', '.join(topics)}: does the topic exist?")
    consumer.assign(partitions)
    ends_now = await consumer.end_offsets(partitions)
    beginnings = await consumer.beginning_offsets(partitions)
    # Tansu's ListOffsets LATEST answers the last produced batch's base offset + 1, not the end; the high
    # watermark of a Fetch response is right (on Apache Kafka both are): take the larger
    for tp in partitions:
        consumer.seek(tp, beginnings[tp])
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(consumer.highwater(tp) is None for tp in partitions):
        await consumer.getmany(
            *(tp for tp in partitions if consumer.highwater(tp) is None), timeout_ms=500, max_records=1
        )
    ends_now = {tp: max(ends_now[tp], consumer.highwater(tp) or 0) for tp in partitions}
    ends_key = f"{keys_prefix}{{versions}}:bf:{group}"
    async with client.pipeline(transaction=False) as pipe:
        for tp in partitions:
            pipe.hsetnx(ends_key, f"{tp.topic}:{tp.partition}", ends_now[tp])
        pipe.hgetall(ends_key)
        pipe.expire(ends_key, 30 * 86400)
        replies = await guard(pipe.execute())
    stored = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in replies[-2].items()}
    end = {tp: stored.get(f"{tp.topic}:{tp.partition}", ends_now[tp]) for tp in partitions}
    start: dict[TopicPartition, int] = {}
    resumed = False
    lost = 0
    by_time = await consumer.offsets_for_times({tp: since_ms for tp in partitions})
    for tp in partitions:
        committed = await consumer.committed(tp)
        if committed is not None and committed >= 0:
            offset, resumed = committed, True
        else:
            found = by_time.get(tp)
            offset = found.offset if found is not None else end[tp]  # no record at or after --from
        if offset < beginnings[tp]:  # removed by retention before it was read
            lost += min(beginnings[tp], end[tp]) - offset if committed is not None else 0
            offset = beginnings[tp]
        start[tp] = min(offset, end[tp])
    return BackfillPlan(group, partitions, start, end, lost, resumed)


def _estimate_cost(suites: LoadedConfig, events: Sequence[tuple[RequestEvent, Suite]]) -> float | None:
    """A rough judge cost of evaluating ``events``: per judged event and priced judge, the prompt's
    characters / 4 + 1,500 tokens of template in, 300 tokens out (docs/versions.md); None without prices."""
    from .judges import prices_of, token_cost

    prices = prices_of({j.name: j for j in suites.judges})
    if not prices:
        return None
    total = 0.0
    for event, suite in events:
        block = suite.config.judge
        if block is None or not sampled(event.id, block.sample_rate):
            continue
        chars = len(event.output) + len(event.input or "") + len(event.expected or "")
        for name, price in prices.items():
            if block.judges is None or name in block.judges:
                total += token_cost(price, chars / 4 + 1500, 300)
    return total


async def run_backfill(
    settings: Settings,
    suites: LoadedConfig,
    *,
    since_ms: int,
    until_ms: int | None = None,
    sample: float = 1.0,
    max_cost: float | None = None,
    output_topic: str | None = None,
    dry_run: bool = False,
    batch: int = 256,
    config_file: str = "<config>",
    on_progress: Callable[[int, int, float], None] | None = None,
    judge_transport: Any = None,
    stop_after: int | None = None,
) -> BackfillReport:
    """Run (or with ``dry_run``, plan and count) a backfill; see the module docstring.

    ``on_progress(offsets read, offsets planned, cost so far)`` after each batch; ``stop_after`` stops
    after that many offsets (tests use it to interrupt a run between batches).
    """
    began = time.monotonic()
    security = KafkaSecurity.from_settings(settings)
    inputs = Inputs(suites.inputs, max_depth=settings.max_event_depth)
    topics = inputs.topics(settings.topic_requests)
    group = backfill_group(settings.app_id, suites, since_ms, until_ms, sample)
    report = BackfillReport(group=group, versions={s.name: s.version for s in suites.scoring})
    assert settings.redis_url is not None
    client = connect(settings.redis_url, max_connections=16, **redis_options(settings))
    store = open_store(
        client, settings, allowed_lateness_s=_NO_LATENESS_LIMIT_S, suites=suites, backfill=True
    )
    store.publish_windows = False
    current = {
        as_text(k): as_text(v) for k, v in (await guard(client.hgetall(store.keys.current_versions))).items()
    }
    live = [f"{s.name} {s.version}" for s in suites.scoring if current.get(s.name) == s.version]
    if live:
        await client.aclose()
        raise ConfigError(
            f"{config_file}: live workers run this version ({', '.join(live)}); a backfill must not "
            "touch a live version's marks and figures: backfill a changed suite (a new version)"
        )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=_servers(settings.kafka_bootstrap_servers),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=batch,
        metadata_max_age_ms=5_000,
        **security.aiokafka_kwargs(),
    )
    producer: AIOKafkaProducer | None = None
    pipeline: Pipeline | None = None
    try:
        await _start(consumer, settings.kafka_bootstrap_servers)
        plan = await plan_backfill(consumer, client, settings.redis_prefix, group, topics, since_ms)
        report.lost = plan.lost
        if plan.lost:
            log.warning(
                "backfill %s: %d offsets were removed by retention before they were read", group, plan.lost
            )
        if not dry_run:
            await register_versions(
                client,
                store.keys,
                [VersionInfo(s.name, s.version, s.label, s.definition) for s in suites.scoring],
                run="backfill",
                file=config_file,
            )
            producer = AIOKafkaProducer(
                bootstrap_servers=_servers(settings.kafka_bootstrap_servers),
                acks="all",
                linger_ms=5,
                **security.aiokafka_kwargs(),
            )
            await _start(producer, settings.kafka_bootstrap_servers)
            pipeline = Pipeline(
                SampledSuites(suites, sample),
                max_event_bytes=settings.max_event_bytes,
                max_event_depth=settings.max_event_depth,
                judge_cache=JudgeCache(client, prefix=settings.redis_prefix),
                result_marks={"backfill": True},
                judge_budget_scope="~backfill",
                judge_transport=judge_transport,
                annotators=annotators(suites),  # the sessions' turns (none without sessions:)
            )
            await pipeline.start()
        # sessions are judged once the whole range is read (their turns are kept in memory meanwhile), so
        # offsets are committed only then: an interrupted run starts again from --from (module docstring)
        sessions = LocalSessions(suites.sessions) if suites.sessions and not dry_run else None
        held: dict[TopicPartition, int] = {}
        for tp in plan.partitions:
            consumer.seek(tp, plan.start[tp])
        todo = {tp for tp in plan.partitions if plan.start[tp] < plan.end[tp]}
        planned = plan.offsets
        estimate: list[tuple[RequestEvent, Suite]] = []
        decoder: Pipeline | None = None
        while todo:
            fetched = await consumer.getmany(*todo, timeout_ms=1000, max_records=batch)
            messages: list[tuple[bytes, Source, float]] = []
            commits: dict[TopicPartition, int] = {}
            for tp, records in fetched.items():
                for record in records:
                    if record.offset >= plan.end[tp]:
                        todo.discard(tp)
                        break
                    report.offsets += 1
                    commits[tp] = record.offset + 1
                    if record.timestamp < since_ms or (until_ms is not None and record.timestamp >= until_ms):
                        continue
                    report.in_range += 1
                    messages.append(
                        (
                            record.value or b"",
                            Source(tp.topic, tp.partition, record.offset),
                            record.timestamp / 1000,
                        )
                    )
                if commits.get(tp, plan.start[tp]) >= plan.end[tp]:
                    todo.discard(tp)
            messages = native_events(inputs, messages, report)
            for tp in list(
                todo
            ):  # a partition whose end is past what the broker returns (compacted, aborted)
                if await consumer.position(tp) >= plan.end[tp]:
                    todo.discard(tp)
            if dry_run:
                decoder = decoder or Pipeline(
                    suites, max_event_bytes=settings.max_event_bytes, max_event_depth=settings.max_event_depth
                )
                for raw, _, _ in messages:
                    try:
                        event = decoder.decode(raw)
                    except EventError:
                        report.dropped += 1
                        continue
                    if not sampled("backfill:" + event.id, sample):
                        report.unsampled += 1
                        continue
                    try:
                        estimate.append((event, suites.route(event)))
                    except EventError:
                        report.dropped += 1
            elif messages:
                assert pipeline is not None and producer is not None
                await _evaluate_and_publish(
                    pipeline,
                    store,
                    producer,
                    output_topic or settings.topic_results,
                    messages,
                    report,
                    sessions,
                )
            if commits and not dry_run and sessions is None:
                await consumer.commit(commits)
            held.update(commits)
            if on_progress is not None:
                on_progress(report.offsets, planned, report.cost)
            if max_cost is not None and report.cost >= max_cost:
                report.stopped = "max_cost"
                break
            if stop_after is not None and report.offsets >= stop_after:
                report.stopped = "interrupted"
                break
        if dry_run:
            report.results = len(estimate)
            report.estimated_cost = _estimate_cost(suites, estimate)
        else:
            if sessions is not None and report.stopped == "end":
                assert pipeline is not None and producer is not None
                await _judge_sessions(pipeline, store, producer, settings.topic_sessions, sessions, report)
                if held:
                    await consumer.commit(held)
            # the last batches' published marks (the others rode along with the next batches)
            await store.flush_published(0)
    finally:
        if pipeline is not None:
            await pipeline.close()
        if producer is not None:
            await producer.stop()
        await consumer.stop()
        await client.aclose()
    report.seconds = time.monotonic() - began
    return report


def native_events(
    inputs: Inputs, messages: Sequence[tuple[bytes, Source, float]], report: BackfillReport
) -> list[tuple[bytes, Source, float]]:
    """The request events of ``messages`` (raw, source, record time), decoded by each topic's input format
    (an OTLP export holds several; a json message is mapped), each with its record's time. A message that
    cannot be decoded counts as dropped."""
    times = {(source.topic, source.partition, source.offset): at for _, source, at in messages}
    out = []
    for item in inputs.expand([(raw, source) for raw, source, _ in messages]):
        if item.error is not None:
            report.dropped += 1
            continue
        out.append(
            (item.raw, item.source, times[(item.source.topic, item.source.partition, item.source.offset)])
        )
    return out


async def _evaluate_and_publish(
    pipeline: Pipeline,
    store: ResultStore,
    producer: AIOKafkaProducer,
    topic: str,
    messages: Sequence[tuple[bytes, Source, float]],
    report: BackfillReport,
    sessions: LocalSessions | None = None,
) -> None:
    """Evaluate a batch (each event's time defaults to its record's), record it, publish the results; the
    turns of ``sessions`` are kept for :func:`_judge_sessions`."""
    outcomes = await asyncio.gather(
        *(pipeline.process(raw, source, received_at=at) for raw, source, at in messages)
    )
    items = []
    for (raw, _, _), outcome in zip(messages, outcomes, strict=True):
        if sessions is not None and outcome.dead_letter is None:  # a turn, or an agent run's step
            sessions.add(turns_in(outcome.annotations))
        if outcome.result is None:
            reason = outcome.dead_letter.reason if outcome.dead_letter is not None else ""
            if "sample" in reason:
                report.unsampled += 1
            else:
                report.dropped += 1
            continue
        for name, value in (outcome.counters or {}).get("judge_panel", {}).items():
            if name.endswith(".cost") and math.isfinite(value):
                report.cost += value
        # the annotations too: the recorders read them (the backfilled version's slices)
        items.append(
            (outcome.result, encode_result(outcome.result), outcome.counters, raw, outcome.annotations)
        )
    if not items:
        return
    receipt = Receipt()
    stored = await store.record_many(items, receipt=receipt)
    deliveries = []
    for (result, encoded, _, _, _), previous in zip(items, stored, strict=True):
        report.counted += previous is None
        if previous == PUBLISHED:  # a resumed backfill: the broker has this result already
            continue
        deliveries.append(await producer.send(topic, key=result.id.encode(), value=previous or encoded))
    await asyncio.gather(*deliveries)
    store.published([receipt])  # the broker has them: their copies go (streameval.store_published)
    report.results += len(items)


async def _judge_sessions(
    pipeline: Pipeline,
    store: ResultStore,
    producer: AIOKafkaProducer,
    topic: str,
    sessions: LocalSessions,
    report: BackfillReport,
) -> None:
    """Judge every session of the range (closed at its end, as ``streameval evaluate`` closes them), record
    each under its version's pair (idempotent by id and turns: a run started again counts nothing twice) and
    publish it, marked ``backfill: true``, to the sessions topic."""
    closed = await sessions.judge_all(pipeline)
    if not closed:
        return
    items = [
        (graded, result.model_dump_json().encode(), counters, content_of(result.turn_ids, result.revision))
        for graded, result, counters in closed
    ]
    for _, _, counters, _ in items:
        for name, value in (counters or {}).get("judge_panel", {}).items():
            if name.endswith(".cost") and math.isfinite(value):
                report.cost += value
    stored = await store.record_many(items)
    deliveries = []
    for (_, result, _), (_, encoded, _, _), previous in zip(closed, items, stored, strict=True):
        report.sessions_counted += previous is None
        key = f"{result.session}:{result.key}".encode()
        deliveries.append(await producer.send(topic, key=key, value=previous or encoded))
    await asyncio.gather(*deliveries)
    report.sessions += len(items)
