"""Prometheus metrics of a worker (prometheus-client), served at ``/metrics`` by the web server.

The pipeline and the processor call the small functions below; nothing else knows Prometheus.
Metric names (all prefixed ``streameval_``) are listed in docs/api.md. Labels stay low-cardinality:
suites, evaluator result names, dead-letter kinds, judge names, topic partitions — never models or ids.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

from . import quality_metrics
from .envelope import Outcome
from .models import PANEL_RESULT_NAME

__all__ = [
    "CONSUMER_LAG",
    "CONTENT_TYPE",
    "EVENTS_IN",
    "IN_FLIGHT",
    "OLDEST_BATCH_AGE",
    "capture_latencies",
    "flush_latencies",
    "in_flight",
    "latency_sink",
    "note_latency",
    "noted_latencies",
    "observe_lag",
    "observe_latencies",
    "observe_outcomes",
    "observe_spans",
    "render",
    "set_stall",
    "stall",
    "take_captured",
    "take_captured_spans",
    "timed",
    "timed_call",
]

# one series per counter is enough; the *_created companions would double the scrape for no use
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated

T = TypeVar("T")
A = TypeVar("A")
CONTENT_TYPE = CONTENT_TYPE_LATEST

EVENTS_IN = Counter("streameval_events_in", "messages taken from the input topics (or file lines)")
RESULTS_OUT = Counter("streameval_results_out", "graded results produced, by suite", ["suite"])
DEAD_LETTERS = Counter("streameval_dead_letters", "events dead-lettered, by kind", ["kind"])
IN_FLIGHT = Gauge("streameval_events_in_flight", "events being evaluated or recorded right now")


class _NotedHistogram(Histogram):
    """A histogram that observes the latencies noted by :func:`note_latency` before anyone reads it."""

    def collect(self) -> Iterable[Metric]:
        flush_latencies()
        return super().collect()


EVALUATOR_LATENCY = _NotedHistogram(
    "streameval_evaluator_latency_seconds",
    "time one evaluator step took for one event, by result name",
    ["evaluator"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
JUDGE_CALLS = Counter("streameval_judge_calls", "HTTP calls made to a judge (cache misses)", ["judge"])
JUDGE_ERRORS = Counter("streameval_judge_errors", "judge verdicts that ended in an error", ["judge"])
JUDGE_RETRIES = Counter("streameval_judge_retries", "extra attempts after a failed judge call", ["judge"])
JUDGE_TOKENS = Counter("streameval_judge_tokens", "tokens spent on judge calls", ["judge", "kind"])
JUDGE_CACHE_HITS = Counter(
    "streameval_judge_cache_hits", "judge answers served from the Redis cache", ["judge"]
)
JUDGE_COST = Counter(
    "streameval_judge_cost", "money spent on a judge's calls (its prices x tokens)", ["judge"]
)
#: the Outcome.counters entry holding the judge panel's window counters
PANEL_COUNTERS = PANEL_RESULT_NAME
SPANS = Counter(
    "streameval_input_spans",
    "spans read from OTLP inputs, by topic and whether they were LLM spans "
    "(evaluated or dead-lettered) or skipped (any other span)",
    ["topic", "kind"],
)
CONSUMER_LAG = Gauge(
    "streameval_consumer_lag",
    "messages behind the partition's high watermark after the last batch, by topic and partition. The "
    "high watermark comes from fetch responses, not ListOffsets (Tansu's ListOffsets LATEST is "
    "wrong); a partition is refreshed only when a batch from it arrives, so an idle partition keeps "
    "its last value",
    ["topic", "partition"],
)


def observe_spans(topic: str, *, llm: int, skipped: int) -> None:
    """Count an OTLP export's spans: ``llm`` made request events (or dead letters), ``skipped`` did not."""
    if _captured is not None:  # in an evaluation process: handed back with the batch (take_captured_spans)
        _captured_spans.append((topic, llm, skipped))
        return
    if llm:
        SPANS.labels(topic, "llm").inc(llm)
    if skipped:
        SPANS.labels(topic, "skipped").inc(skipped)


OLDEST_BATCH_AGE = Gauge(
    "streameval_oldest_unpublished_batch_age_seconds",
    "age of the oldest batch taken from the partition but not yet published and acked (0: none); above "
    "STREAMEVAL_STALL_AFTER_S the worker logs a stall and /ready answers 503",
    ["topic", "partition"],
)
STALLS = Counter("streameval_stalls", "times a taken batch stayed unpublished past STREAMEVAL_STALL_AFTER_S")
_stall: list[str | None] = [None]


def set_stall(description: str | None) -> None:
    """Mark the worker stalled (``description`` says where) or not (``None``); /ready reads it."""
    if description is not None and _stall[0] is None:
        STALLS.inc()
    _stall[0] = description


def stall() -> str | None:
    """The current stall, if any (:class:`streameval.inflight.StallWatchdog`)."""
    return _stall[0]


@contextmanager
def in_flight(n: int) -> Iterator[None]:
    """Count ``n`` events as in flight for the duration of the block."""
    IN_FLIGHT.inc(n)
    try:
        yield
    finally:
        IN_FLIGHT.dec(n)


# labels() validates and hashes its arguments on every call (2 % of a worker's CPU on the hot path);
# the children are cached per evaluator name (few and fixed by the suite file)
_latency_children: dict[str, Histogram] = {}


def _latency(name: str) -> Histogram:
    child = _latency_children.get(name)
    if child is None:
        child = _latency_children[name] = EVALUATOR_LATENCY.labels(name)
    return child


# In an evaluation process (streameval.evalpool) nobody scrapes the process's own registry: evaluator
# latencies are kept here and handed back with the batch for the worker to observe.
_captured: list[tuple[str, float]] | None = None

# Latencies of the synchronous evaluators (:func:`note_latency`), observed together by
# :func:`flush_latencies`: whenever the histogram is read (a scrape, ``REGISTRY.get_sample_value``) and
# whenever _FLUSH_AT are waiting, so every reader sees what it saw before. One histogram ``observe`` per evaluator
# per event cost ~1.5 µs (a lock per bucket and sum increment); the flush adds each series' counts once.
# A deque: ``render`` runs in a thread, and append / popleft are atomic.
_noted: deque[tuple[str, float]] = deque()
_FLUSH_AT = 4096


def _observe_latency(name: str, seconds: float) -> None:
    if _captured is not None:
        _captured.append((name, seconds))
    else:
        _latency(name).observe(seconds)


def note_latency(name: str, seconds: float) -> None:
    """Observe ``seconds`` under evaluator ``name`` at the next :func:`flush_latencies` (the same
    exported figures as observing it now, once flushed)."""
    if _captured is not None:
        _captured.append((name, seconds))
        return
    _noted.append((name, seconds))
    if len(_noted) >= _FLUSH_AT:
        flush_latencies()


def latency_sink() -> Callable[[tuple[str, float]], None]:
    """What :func:`note_latency` appends ``(name, seconds)`` to, for a caller noting several at once (the
    pipeline, once per event); call :func:`noted_latencies` after them."""
    return _noted.append if _captured is None else _captured.append


def noted_latencies() -> None:
    """After appending to :func:`latency_sink`: flush when many wait, as :func:`note_latency` does."""
    if len(_noted) >= _FLUSH_AT:
        flush_latencies()


def flush_latencies() -> None:
    """Observe the latencies noted since the last flush, in the order they were noted."""
    if not _noted:
        return
    by_name: dict[str, list[float]] = {}
    popleft = _noted.popleft
    for _ in range(len(_noted)):
        name, seconds = popleft()
        found = by_name.get(name)
        if found is None:
            by_name[name] = [seconds]
        else:
            found.append(seconds)
    for name, amounts in by_name.items():
        quality_metrics.observe_many(_latency(name), amounts)


_captured_spans: list[tuple[str, int, int]] = []


def capture_latencies() -> None:
    """From now on keep evaluator latencies for :func:`take_captured` (and OTLP span counts for
    :func:`take_captured_spans`) instead of observing them."""
    global _captured
    _captured = []


def take_captured_spans() -> list[tuple[str, int, int]]:
    """The (topic, llm, skipped) span counts kept since the last call (see :func:`capture_latencies`)."""
    taken = list(_captured_spans)
    _captured_spans.clear()
    return taken


def take_captured() -> list[tuple[str, float]]:
    """The latencies kept since the last call (see :func:`capture_latencies`)."""
    global _captured
    if _captured is None:
        return []
    taken, _captured = _captured, []
    return taken


def observe_latencies(pairs: Iterable[tuple[str, float]]) -> None:
    """Observe (evaluator, seconds) pairs measured elsewhere (an evaluation process)."""
    for name, seconds in pairs:
        note_latency(name, seconds)
    flush_latencies()


def timed_call(name: str, call: Callable[[A], T], arg: A) -> T:
    """``call(arg)``, its duration observed under evaluator ``name`` (also when it raises)."""
    started = time.perf_counter()
    try:
        return call(arg)
    finally:
        _observe_latency(name, time.perf_counter() - started)


async def timed(name: str, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``, its duration observed under evaluator ``name`` (also when it raises)."""
    started = time.perf_counter()
    try:
        return await awaitable
    finally:
        _observe_latency(name, time.perf_counter() - started)


#: window counters of the judge panel (``{judge}.{counter}``, :func:`streameval.judges.judge_counters` and
#: ``repeat_counters``) and the metric each one is added to: telemetry observes what the panel counted
_JUDGE_METRICS: dict[str, Callable[[str], Counter]] = {
    "calls": lambda judge: JUDGE_CALLS.labels(judge),
    "repeat_calls": lambda judge: JUDGE_CALLS.labels(judge),  # consistency repeats are HTTP calls too
    "retries": lambda judge: JUDGE_RETRIES.labels(judge),
    "prompt_tokens": lambda judge: JUDGE_TOKENS.labels(judge, "prompt"),
    "completion_tokens": lambda judge: JUDGE_TOKENS.labels(judge, "completion"),
    "cache_hits": lambda judge: JUDGE_CACHE_HITS.labels(judge),
    "errors": lambda judge: JUDGE_ERRORS.labels(judge),
    "cost": lambda judge: JUDGE_COST.labels(judge),
}
_judge_children: dict[str, Counter] = {}  # "{judge}.{counter}": its labelled child (see _latency)


def _observe_judge_counters(counters: dict[str, float]) -> None:
    for name, value in counters.items():
        if ":" in name:  # pair:, alpha:, repeat:, skip: sums, not per-judge counters
            continue
        child = _judge_children.get(name)
        if child is None:
            judge, _, counter = name.rpartition(".")
            metric = _JUDGE_METRICS.get(counter)
            if metric is None:  # n, score_sum, ...: window statistics, not metrics
                continue
            child = _judge_children[name] = metric(judge)
        child.inc(value)


def observe_outcomes(outcomes: Sequence[Outcome]) -> None:
    """Count results by suite, dead letters by kind and judge activity of one batch.

    Judge activity is read from the counters the panel computed for the window aggregates (the
    ``judge_panel`` entry of :attr:`Outcome.counters`), so ``/metrics`` and the aggregates agree."""
    quality_metrics.observe(outcomes)  # score, pass and grade series by model and suite
    dead: dict[str, int] = {}
    suites: dict[str, int] = {}  # results and dead letters counted per batch: one inc per series
    for outcome in outcomes:
        if outcome.dead_letter is not None:
            dead[outcome.dead_letter.kind] = dead.get(outcome.dead_letter.kind, 0) + 1
        result = outcome.result
        if result is None:
            continue
        suites[result.suite] = suites.get(result.suite, 0) + 1
        panel = outcome.counters.get(PANEL_COUNTERS) if outcome.counters else None
        if panel:
            _observe_judge_counters(panel)
    for kind, count in dead.items():
        DEAD_LETTERS.labels(kind).inc(count)
    for suite, count in suites.items():
        RESULTS_OUT.labels(suite).inc(count)


def observe_lag(
    positions: Iterable[tuple[str | None, int | None, int | None]],
    highwater: Callable[[str, int], int | None],
) -> dict[tuple[str, int], int]:
    """Set the lag of each (topic, partition, last offset processed) from ``highwater(topic, partition)``,
    the offset the next produced message will get; returns the lags set (the worker's
    :class:`~streameval.signals.ConsumerLag` keeps them for backpressure: metrics are never read back)."""
    lags: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        if topic is None or partition is None or offset is None:
            continue
        last[(topic, partition)] = max(offset, last.get((topic, partition), -1))
    for (topic, partition), offset in last.items():
        mark = highwater(topic, partition)
        if mark is not None and mark >= 0:
            lags[(topic, partition)] = lag = max(0, mark - offset - 1)
            CONSUMER_LAG.labels(topic, str(partition)).set(lag)
    return lags


def render() -> bytes:
    """The Prometheus text exposition of every metric (and the process collectors)."""
    return generate_latest(REGISTRY)


#: events whose model × suite pair is beyond STREAMEVAL_MAX_PAIRS: aggregated under the overflow model
AGGREGATE_OVERFLOW = Counter(
    "streameval_aggregate_overflow",
    "events aggregated under the overflow model (pair cap reached), by suite",
    ["suite"],
)

LABELS = Counter(
    "streameval_labels",
    "human labels from the feedback topic, by outcome: joined, unmatched, invalid, full",
    ["outcome"],
)
HUMAN_AGREEMENT = Gauge(
    "streameval_human_agreement",
    "agreement with people in the last published window of a suite (any model): figure kappa, alpha, pearson, "
    "spearman, mae, bias, n; rater result, panel, judge:{name}, evaluator:{name}",
    ["suite", "rater", "figure"],
)

EMBEDDING_DRIFT = Gauge(
    "streameval_embedding_drift",
    "the outputs' embedding drift in the last window compared, of a suite (any model): figure "
    "centroid_distance, mmd2, count (docs/drift.md); set by the worker that folded it",
    ["suite", "figure"],
)


def observe_human_agreement(suite: str, raters: dict[str, dict[str, float | None]]) -> None:
    """Set the gauges of a window's human agreement (``raters``: rater -> figure -> value)."""
    for rater, figures in raters.items():
        for figure, value in figures.items():
            if value is not None:
                HUMAN_AGREEMENT.labels(suite, rater, figure).set(value)


REVIEW_SENT = Counter(
    "streameval_review_sent",
    "results published to the review topic, by suite and reason",
    ["suite", "reason"],
)
REVIEW_DROPPED = Counter(
    "streameval_review_dropped",
    "review candidates dropped by the rate bound (review.rate_per_min), by suite",
    ["suite"],
)

#: turns of sessions (streameval.features.sessions), by what became of them: appended, duplicate (a redelivered
#: turn), revised (appended within grace_s of closing: a revision follows), late (after grace_s: evaluated
#: as an event only), keyless (the event matched a session but has no key there)
SESSION_TURNS = Counter(
    "streameval_session_turns", "turns offered to sessions, by session and outcome", ["session", "outcome"]
)
SESSIONS_CLOSED = Counter(
    "streameval_sessions_closed",
    "session results published, by session and closed_by",
    ["session", "closed_by"],
)
SESSION_CLOSE_DELAY = Histogram(
    "streameval_session_close_delay_seconds",
    "from a session's close deadline to its result's publication",
    buckets=(0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300),
)
#: values replaced before text left the process (judge prompts, review items, examples, dead letters; docs/redact.md)
REDACTIONS = Counter("streameval_redactions", "values redacted before leaving, by kind", ["kind"])

#: alert notifications per channel (docs/notify.md); channel names come from the suite file (few)
NOTIFY_SENT = Counter("streameval_notify_sent", "notifications a channel accepted (2xx)", ["channel"])
NOTIFY_FAILED = Counter(
    "streameval_notify_failed", "delivery attempts that failed (error, timeout or not 2xx)", ["channel"]
)
NOTIFY_RETRIED = Counter("streameval_notify_retried", "delivery attempts after a failed one", ["channel"])
NOTIFY_DEAD_LETTERED = Counter(
    "streameval_notify_dead_lettered", "notifications given up on (dead letters)", ["channel"]
)
NOTIFY_LATENCY = Histogram(
    "streameval_notify_latency_seconds",
    "one delivery attempt, request to answer",
    ["channel"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
