"""The evaluation pipeline, free of Faust and Redis: raw bytes in, a graded result or a dead letter out.

``decode`` → ``route`` → evaluate every evaluator of the suite → judge panel (when the suite has a
``judge`` block) → ``combine`` / blend → :class:`GradedResult`. Judges of one event run concurrently
with each other; the stream worker keeps many events in flight, so a slow judge does not serialise
the stream. Pass ``judge_cache`` (a :class:`~streameval.judges.JudgeCache` on the worker's Redis) to
cache judge answers, and ``judge_transport`` only in tests.

The stream worker and the offline ``streameval evaluate`` both call :meth:`Pipeline.process`, so the
two give the same results for the same events.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import orjson

from . import telemetry
from ._util import clip
from ._version import __version__
from .config import BoundEvaluator, LoadedConfig, Suite, redaction
from .envelope import DEFAULT_MAX_EVENT_BYTES, Outcome, Source, result_outcome
from .errors import EventError
from .evaluators import Evaluator, Score
from .event_decoder import EventDecoder
from .feature import Annotator, Redaction
from .judges import PANEL_RESULT_NAME, JudgeCache, JudgeHub, SuiteJudge, sampled
from .models import (
    DeadLetter,
    DeadLetterSource,
    EvaluatorResult,
    GradedResult,
    JudgeBlock,
    RequestEvent,
    format_time,
)
from .result_build import combined, error_result, graded, placeholder, ready, to_result
from .signals import no_lag
from .strictjson import DEFAULT_MAX_EVENT_DEPTH
from .telemetry import latency_sink, noted_latencies

T = TypeVar("T")
perf_counter = time.perf_counter

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Outcome", "Pipeline", "Source"]

log = logging.getLogger(__name__)

#: the annotations of an outcome no annotator noted anything of (shared: never written to)
_NO_NOTES: dict[str, Any] = {}


class Pipeline:
    def __init__(
        self,
        suites: LoadedConfig,
        *,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_event_depth: int = DEFAULT_MAX_EVENT_DEPTH,
        clock: Callable[[], float] = time.time,
        judge_cache: JudgeCache | None = None,
        judge_transport: httpx.AsyncBaseTransport | None = None,
        lag: Callable[[], int] = no_lag,
        result_marks: Mapping[str, Any] | None = None,
        judge_budget_scope: str = "",
        annotators: Sequence[Annotator] = (),
    ) -> None:
        """``annotators``: what the features the composition root turned on note of each event (streameval.feature,
        ``Annotator``; streameval.features.setup.annotators), kept in its outcome's ``annotations``."""
        self.suites = suites
        # fields set on every result: {"shadow": True} for shadows, {"backfill": True} for backfills
        self.result_marks = dict(result_marks or {})
        self.judges: JudgeHub | None = None
        self._suite_judges: dict[str, SuiteJudge] = {}
        if any(s.config.judge is not None for s in suites.scoring):
            self.judges = JudgeHub(
                suites.judges, cache=judge_cache, transport=judge_transport, budget_scope=judge_budget_scope
            )
            self._suite_judges = {
                s.name: SuiteJudge(
                    s.config.judge, self.judges, threshold=s.config.threshold, suite=s.name, lag=lag
                )
                for s in suites.scoring
                if s.config.judge is not None
            }
        # redaction before judging (docs/redact.md); None: the suite file has no redact: block
        self.redactors: Redaction | None = redaction(suites)
        self._sync_suites: dict[str, bool] = {}
        self._gated: dict[str, frozenset[str]] = {}  # per suite: the names of its gate evaluators
        # per suite object (held, so its id stays its own): its evaluators as _run_rules reads them
        self._rules: dict[int, tuple[Suite, tuple[tuple[BoundEvaluator, Evaluator, bool], ...]]] = {}
        self.decoder = EventDecoder(max_event_bytes, max_event_depth)  # its limits: max_event_bytes, _depth
        self.clock = clock
        self.annotators = tuple(annotators)

    async def start(self) -> None:
        await self.suites.start()
        if self.judges is not None:
            await self.judges.start()

    async def close(self) -> None:
        await self.suites.close()
        if self.judges is not None:
            await self.judges.close()

    # -- decode -------------------------------------------------------------------------------
    def decode(self, raw: bytes) -> RequestEvent:
        """Parse and validate one request event (:meth:`EventDecoder.decode`). Raises an :class:`EventError`
        subclass."""
        return self.decoder.decode(raw)

    # -- evaluate -----------------------------------------------------------------------------
    async def evaluate(
        self, event: RequestEvent, suite: Suite, *, received_at: float
    ) -> tuple[GradedResult, dict[str, dict[str, float]]]:
        results: list[EvaluatorResult] = []
        counters: dict[str, dict[str, float]] = {}
        pending: list[tuple[int, BoundEvaluator, asyncio.Task[Score]]] = []
        suite_judge = self._suite_judges.get(suite.name)
        # the judges see the event redacted; the rule evaluators, the original (docs/redact.md)
        judged, redacted = event, None
        if self.redactors is not None and suite_judge is not None and self.may_judge(event, suite):
            judged, redacted = self.redactors.judged(event, suite.name)
        # a blend panel does not need the rule scores: its judges start before the rules run
        early = suite_judge.begin(judged) if suite_judge is not None else None
        self._run_rules(event, suite, results, counters, pending)
        for index, bound, task in pending:
            try:
                score = await task
            except Exception as exc:
                results[index] = error_result(bound, exc, event)
                continue
            results[index] = to_result(bound, score)
            if score.counters:
                counters[bound.name] = score.counters

        overall = combined(results)
        judge_block = None
        if suite_judge is not None:
            judgement = await suite_judge.run(judged, results, early)
            overall, results, judge_block = judgement.score, judgement.results, judgement.block
            if judgement.counters:
                counters[PANEL_RESULT_NAME] = judgement.counters
        return self._graded(event, suite, results, overall, judge_block, received_at, redacted), counters

    def evaluate_sync(
        self, event: RequestEvent, suite: Suite, *, received_at: float
    ) -> tuple[GradedResult, dict[str, dict[str, float]]]:
        """:meth:`evaluate` of a :meth:`runs_sync` suite, as a plain function (no event loop)."""
        if not self.runs_sync(suite):
            raise RuntimeError(
                f"suite {suite.name!r} has a judge panel or an async evaluator: await evaluate()"
            )
        results: list[EvaluatorResult] = []
        counters: dict[str, dict[str, float]] = {}
        self._run_rules(event, suite, results, counters, None)
        overall = combined(results)
        return self._graded(event, suite, results, overall, None, received_at), counters

    def _run_rules(
        self,
        event: RequestEvent,
        suite: Suite,
        results: list[EvaluatorResult],
        counters: dict[str, dict[str, float]],
        pending: list[tuple[int, BoundEvaluator, asyncio.Task[Score]]] | None,
    ) -> None:
        """Evaluate the suite's synchronous evaluators into ``results`` / ``counters``, in suite order; each
        async one is started as a task into ``pending`` (its placeholder in ``results``)."""
        noted = latency_sink()  # each duration observed once per batch (telemetry)
        for bound, evaluator, samples in self._rules_of(suite):
            if samples and not evaluator.wants(event):
                continue
            if evaluator.is_async:
                if pending is None:
                    raise RuntimeError(f"evaluator {bound.name!r} is asynchronous: await evaluate()")
                task = asyncio.ensure_future(telemetry.timed(bound.name, evaluator.aevaluate(event)))
                pending.append((len(results), bound, task))
                results.append(placeholder(bound))
                continue
            started = perf_counter()
            try:
                score = evaluator.evaluate(event)
            except Exception as exc:  # an evaluator failing on one event never stops the stream
                noted((bound.name, perf_counter() - started))
                results.append(error_result(bound, exc, event))
                continue
            noted((bound.name, perf_counter() - started))
            results.append(to_result(bound, score))
            if score.counters:
                counters[bound.name] = score.counters
        noted_latencies()

    def _rules_of(self, suite: Suite) -> tuple[tuple[BoundEvaluator, Evaluator, bool], ...]:
        """The suite's (bound evaluator, evaluator, whether it may leave events out) once per suite: the
        base class's ``wants`` takes every event, so it is not called for evaluators that keep it."""
        found = self._rules.get(id(suite))
        if found is None or found[0] is not suite:
            if len(self._rules) >= 1024:  # a pipeline's suites are fixed: a guard, not a path
                self._rules.clear()
            found = self._rules[id(suite)] = (
                suite,
                tuple(
                    (bound, bound.evaluator, type(bound.evaluator).wants is not Evaluator.wants)
                    for bound in suite.evaluators
                ),
            )
        return found[1]

    def _graded(
        self,
        event: RequestEvent,
        suite: Suite,
        results: list[EvaluatorResult],
        overall: float,
        judge_block: JudgeBlock | None,
        received_at: float,
        redacted: dict[str, int] | None = None,
    ) -> GradedResult:
        """The graded result (:func:`~streameval.result_build.graded`) on this pipeline's clock and marks."""
        gated = self._gated.get(suite.name)
        if gated is None:
            gated = self._gated[suite.name] = frozenset(
                bound.name for bound in suite.evaluators if bound.gate
            )
        return graded(
            event,
            suite,
            gated,
            results,
            overall,
            judge_block,
            received_at,
            self.clock(),
            self.result_marks,
            redacted,
        )

    def runs_sync(self, suite: Suite) -> bool:
        """True when ``suite`` needs no event loop: no judge panel and no async evaluator (sandboxed code,
        registered evaluators). Only such suites are evaluated in evaluation processes (:mod:`.evalpool`)."""
        sync = self._sync_suites.get(suite.name)
        if sync is None:
            sync = self._sync_suites[suite.name] = suite.name not in self._suite_judges and not any(
                bound.evaluator.is_async for bound in suite.evaluators
            )
        return sync

    def process_sync(self, raw: bytes, source: Source, received_at: float) -> Outcome | None:
        """:meth:`process` without an event loop, or ``None`` when the event's suite needs one
        (:meth:`runs_sync` is false: the caller then awaits :meth:`process`). Never raises for a bad event."""
        try:
            event = self.decode(raw)
            suite = self.suites.route(event)
            if not self.runs_sync(suite):
                return None
            result, counters = self.evaluate_sync(event, suite, received_at=received_at)
        except Exception as exc:
            return self._failed(raw, source, exc)
        return self._outcome(event, suite, result, counters)

    def process_sync_batch(
        self, batch: Sequence[tuple[bytes, Source]], received_at: float
    ) -> list[Outcome | None]:
        """:meth:`process_sync` of each event of ``batch``, in order, with each suite's evaluators
        :meth:`~streameval.evaluators.Evaluator.prepare`-d once on the batch's events of that suite
        (semantic similarity embeds a whole batch in one pass). Never raises for a bad event."""
        found: list[Outcome | None] = [None] * len(batch)
        routed: list[tuple[int, RequestEvent, Suite]] = []
        for i, (raw, source) in enumerate(batch):
            try:
                event = self.decode(raw)
                suite = self.suites.route(event)
            except Exception as exc:
                found[i] = self._failed(raw, source, exc)
                continue
            if self.runs_sync(suite):
                routed.append((i, event, suite))
        by_suite: dict[str, list[RequestEvent]] = {}
        for _, event, suite in routed:
            by_suite.setdefault(suite.name, []).append(event)
        for name, events in by_suite.items():
            suite = self.suites.by_name[name]
            for bound in suite.evaluators:
                if type(bound.evaluator).prepare is Evaluator.prepare:
                    continue  # nothing to do per batch (every rule but semantic similarity)
                wanted = [e for e in events if bound.evaluator.wants(e)]
                if wanted:
                    try:
                        bound.evaluator.prepare(wanted)
                    except Exception:  # evaluate() then meets the same problem per event, as a result
                        log.warning("evaluator %s could not prepare a batch", bound.name, exc_info=True)
        graded: list[tuple[int, RequestEvent, Suite, GradedResult, dict[str, dict[str, float]]]] = []
        for i, event, suite in routed:
            raw, source = batch[i]
            try:
                result, counters = self.evaluate_sync(event, suite, received_at=received_at)
            except Exception as exc:
                found[i] = self._failed(raw, source, exc)
                continue
            if not self.annotators:  # as process_sync
                found[i] = result_outcome(result, counters, _NO_NOTES)
            else:
                graded.append((i, event, suite, result, counters))
        if graded:  # each annotator once a batch (embedding drift: one encoder call)
            notes = self._notes([(event, result, suite) for _, event, suite, result, _ in graded])
            for (i, _, _, result, counters), annotations in zip(graded, notes, strict=True):
                found[i] = result_outcome(result, counters, annotations)
        return found

    async def process(
        self, raw: bytes, source: Source = Source(), *, received_at: float | None = None
    ) -> Outcome:
        """Raw bytes to a result or a dead letter. Never raises for a bad event."""
        if received_at is None:
            received_at = self.clock()
        try:
            event = self.decode(raw)
            suite = self.suites.route(event)
            result, counters = await self.evaluate(event, suite, received_at=received_at)
        except Exception as exc:
            return self._failed(raw, source, exc)
        return self._outcome(event, suite, result, counters)

    def may_judge(self, event: RequestEvent, suite: Suite) -> bool:
        """Whether evaluating ``event`` in ``suite`` may call a judge: false when the suite has no judge
        panel, or its sampling or backpressure leaves the event out (decided by the same event-id hash
        as :class:`~streameval.judges.SuiteJudge`; a budget skip is only known once the panel runs)."""
        suite_judge = self._suite_judges.get(suite.name)
        if suite_judge is None:
            return False
        rate = suite_judge.config.sample_rate
        if not sampled(event.id, rate):
            return False
        pressure = suite_judge.pressure
        return pressure is None or sampled(event.id, rate * pressure.current)

    def begin(
        self, raw: bytes, source: Source = Source(), *, received_at: float
    ) -> tuple[Awaitable[Outcome], bool]:
        """Start :meth:`process` of one event now: (its outcome, whether it may call a judge, :meth:`may_judge`).

        The stream worker publishes the outcomes of events that call no judge without waiting for the
        judged ones (:mod:`streameval.processor`). Never raises for a bad event.
        """
        try:
            event = self.decode(raw)
            suite = self.suites.route(event)
        except Exception as exc:
            return ready(self._failed(raw, source, exc)), False
        return asyncio.ensure_future(self._evaluated(raw, source, event, suite, received_at)), self.may_judge(
            event, suite
        )

    async def _evaluated(
        self, raw: bytes, source: Source, event: RequestEvent, suite: Suite, received_at: float
    ) -> Outcome:
        try:
            result, counters = await self.evaluate(event, suite, received_at=received_at)
        except Exception as exc:
            return self._failed(raw, source, exc)
        return self._outcome(event, suite, result, counters)

    def _outcome(
        self, event: RequestEvent, suite: Suite, result: GradedResult, counters: dict[str, dict[str, float]]
    ) -> Outcome:
        if not self.annotators:
            return result_outcome(result, counters, _NO_NOTES)
        return result_outcome(result, counters, self._notes([(event, result, suite)])[0])

    def _notes(self, graded: Sequence[tuple[RequestEvent, GradedResult, Suite]]) -> list[Mapping[str, Any]]:
        """Each graded event's annotations: what every annotator noted of it (None: nothing), by its key."""
        found: list[dict[str, Any]] = [{} for _ in graded]
        for annotator in self.annotators:
            key = annotator.key
            for notes, note in zip(found, annotator.annotate(graded), strict=True):
                if note is not None:
                    notes[key] = note
        return [notes or _NO_NOTES for notes in found]

    def step(self, raw: bytes, source: Source) -> Outcome:
        """The outcome of an agent run's step (an input's step item: a tool or root span's document): its
        annotations only (the sessions' turns), no result; never evaluated. Never raises for a bad step (a
        dead letter)."""
        try:
            document = orjson.loads(raw)
            now = self.clock()
            notes = {a.key: n for a in self.annotators if (n := a.step(document, now)) is not None}
            return Outcome(annotations=notes or _NO_NOTES)
        except Exception as exc:
            return self._failed(raw, source, exc)

    def failed(self, raw: bytes, source: Source, exc: Exception) -> Outcome:
        """The dead-letter outcome of ``raw`` for ``exc`` (input decoders use it for what they cannot read)."""
        return self._failed(raw, source, exc)

    def _failed(self, raw: bytes, source: Source, exc: Exception) -> Outcome:
        """The dead letter of an event that could not be evaluated: a bad event, or a bug of ours (kept too)."""
        if isinstance(exc, EventError):
            return Outcome(dead_letter=self.dead_letter(raw, exc.kind, exc.reason, source, exc.event_id))
        log.error("internal error evaluating an event from %s", source, exc_info=exc)
        return Outcome(
            dead_letter=self.dead_letter(raw, "internal", f"{type(exc).__name__}: {exc}", source, None)
        )

    def dead_letter(
        self, raw: bytes, kind: Any, reason: str, source: Source, event_id: str | None
    ) -> DeadLetter:
        truncated = None
        if self.redactors is not None:  # redact: dead_letters (docs/redact.md)
            raw, reason, truncated = self.redactors.dead_letter(raw, reason)
        return DeadLetter(
            raw=base64.b64encode(raw).decode("ascii"),
            truncated=truncated,
            reason=clip(reason),
            kind=kind,
            event_id=event_id,
            source=DeadLetterSource(topic=source.topic, partition=source.partition, offset=source.offset),
            failed_at=format_time(self.clock()),
            pipeline_version=__version__,
        )
