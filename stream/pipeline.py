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
import gc
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import orjson
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from . import schemas, telemetry
from ._util import clip, json_path
from ._version import __version__
from .config import BoundEvaluator, LoadedConfig, Suite, redaction
from .embedding import encoder
from .embedding_drift import DriftSample, sample
from .embedding_drift import sampled as drift_sampled
from .envelope import DEFAULT_MAX_EVENT_BYTES, Outcome, Source, result_outcome
from .errors import EventError, EventTooLarge, InvalidJSON, SchemaViolation
from .evaluators import Evaluator, Score
from .evaluators.semantic import SemanticSimilarity
from .feature import Redaction
from .features.sessions.turns import step_turns, turns_of
from .grading import apply_gates, grade
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
from .result_build import built_graded, combined, error_result, placeholder, plain_graded, ready, to_result
from .signals import no_lag
from .strictjson import DEFAULT_MAX_EVENT_DEPTH, check_depth, check_strict, parse_plain
from .telemetry import latency_sink, noted_latencies

T = TypeVar("T")
perf_counter = time.perf_counter
_validate_event = RequestEvent.__pydantic_validator__.validate_python  # strict: the model's config

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Outcome", "Pipeline", "Source"]

log = logging.getLogger(__name__)

_LISTED_ERRORS = 50  # a rejection lists pydantic's errors only when there are at most this many
_EXPLAIN_MAX_BYTES = 64 * 1024  # larger events are explained in pydantic's words, not jsonschema's


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
        embed_outputs: bool = False,
    ) -> None:
        """``embed_outputs``: compute embedding drift's numbers of each output (the stream worker's
        live pipeline, when the suite file has ``windowing.embedding_drift``; offline runs do not)."""
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
        self.max_event_bytes = max_event_bytes
        self.max_event_depth = max_event_depth
        self.clock = clock
        # Built once: used only to explain a rejection in the contract's own terms.
        self._request_validator = Draft202012Validator(schemas.load("request"))
        # embedding drift (docs/drift.md): the outputs' vectors, live evaluations only (shadows and
        # backfills never alert)
        drift = suites.windowing.embedding_drift
        self.embedding_drift = drift if embed_outputs and not self.result_marks else None

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
        """Parse and validate one request event. Raises an :class:`EventError` subclass.

        Events over ``max_event_bytes`` are rejected before any parsing (memory stays bounded by it);
        accepted ones must also be strict JSON (no duplicate keys, NaN/Infinity, or nesting deeper
        than ``max_event_depth``: :mod:`streameval.strictjson`).
        """
        if len(raw) > self.max_event_bytes:
            raise EventTooLarge(f"event is {len(raw)} bytes; the limit is {self.max_event_bytes}")
        event = self._decode_once(raw)
        if event is not None:
            return event
        check_depth(raw, max_depth=self.max_event_depth)  # before pydantic parses any depth
        # Parsing builds only trees (no cycles): with the cyclic GC paused, an event of 350,000 empty
        # arrays costs ~100 ms/MiB instead of ~400 ms, the collector re-walking the heap as it grows.
        paused = gc.isenabled()
        gc.disable()
        try:
            try:
                # pydantic validation mirrors schemas/request-event.v1.json (tests/schemas/test_contracts.py)
                event = RequestEvent.model_validate_json(raw)
            except ValidationError as exc:
                raise self._explain(raw, exc) from None
            check_strict(raw, event_id=event.id)
        finally:
            if paused:
                gc.enable()
        return event

    def _decode_once(self, raw: bytes) -> RequestEvent | None:
        """The event :meth:`decode` gives for ``raw``, parsed once, or None: then :meth:`decode` goes the
        usual way (depth, pydantic's JSON validation, the strict pass), which also gives every rejection.

        One strict parse (:func:`~streameval.strictjson.parse_plain`: orjson's when the bytes are exactly
        its own writing, else the strict pass's) validated by pydantic from Python objects: for a plain
        document (see there) pydantic's JSON parser reads the same values,
        and the request model's strict validation accepts them alike from JSON and from Python
        (tests/core/test_decode_once.py compares the two ways on every corpus and on edge documents).
        Depth is checked after, unless the event cannot nest (no metadata, no blocks: depth 2 at most).
        """
        paused = gc.isenabled()
        gc.disable()  # as in decode
        try:
            document = parse_plain(raw)
            if document is None:
                return None
            try:
                event: RequestEvent = _validate_event(document)
            except ValidationError:
                return None
        finally:
            if paused:
                gc.enable()
        if (
            event.metadata
            or event.report is not None
            or event.retrieval is not None
            or event.agent is not None
            or self.max_event_depth < 2
        ):
            check_depth(raw, max_depth=self.max_event_depth)  # what decode would raise first
        return event

    def _explain(self, raw: bytes, exc: ValidationError) -> EventError:
        """The reason of a rejection, in bounded time: pydantic may report one error per list item or
        unknown key, and listing them (or re-validating with jsonschema) costs ~1 s per MiB."""
        count = exc.error_count()
        errors = exc.errors(include_url=False) if count <= _LISTED_ERRORS else []
        if any(e["type"] == "json_invalid" for e in errors):
            message = errors[0]["msg"].removeprefix("Invalid JSON: ")  # pydantic's prefix says it again
            return InvalidJSON(f"not valid JSON: {clip(message)}")
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as json_exc:
            return InvalidJSON(f"not valid JSON: {json_exc}")
        event_id = document.get("id") if isinstance(document, dict) else None
        event_id = event_id if isinstance(event_id, str) else None
        found = []
        if len(raw) <= _EXPLAIN_MAX_BYTES:  # jsonschema is pure Python: ~4 µs per list item
            first = itertools.islice(self._request_validator.iter_errors(document), 5)
            found = sorted(first, key=lambda e: list(e.absolute_path))
        if found:
            reason = "; ".join(f"{json_path(e.absolute_path)}: {e.message}" for e in found)
        elif errors:  # a large event, or the schema accepts what pydantic rejects (a contract test gap)
            reason = "; ".join(f"{json_path(e['loc'])}: {e['msg']}" for e in errors[:5])
        else:
            reason = f"{count} problems (not listed for an event of {len(raw)} bytes)"
        return SchemaViolation(f"does not match request-event.v1: {clip(reason)}", event_id=event_id)

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
        """The graded result: gates applied to the overall score; ``redacted``: what the judges did not see."""
        gated = self._gated.get(suite.name)
        if gated is None:
            gated = self._gated[suite.name] = frozenset(
                bound.name for bound in suite.evaluators if bound.gate
            )
        config = suite.config
        failed_gates: list[str] = []
        reason = None
        if gated:
            verdict = apply_gates(
                overall,
                config.threshold,
                config.grading,
                ((r.name, r.passed and r.error is None, r.reason) for r in results if r.name in gated),
            )
            passed, grade_ = verdict.passed, verdict.grade
            failed_gates = list(verdict.failed_gates)
            reason = clip(verdict.reason) if verdict.reason else None
        else:  # what apply_gates gives without gates
            passed, grade_ = overall >= config.threshold, grade(overall, config.grading)
        now = self.clock()
        marks = self.result_marks
        values: dict[str, Any] = {
            "id": event.id,
            "model": event.model,
            "suite": suite.name,
            "category": event.category,
            "score": overall,
            "passed": passed,
            "threshold": config.threshold,
            "grade": grade_,
            "evaluators": results,
            "event_time": format_time(event.event_time(received_at)),
            "evaluated_at": format_time(now),
            "latency_ms": round(max(0.0, now - received_at) * 1000, 3),
            "pipeline_version": __version__,
            "judge": judge_block,
            "failed_gates": failed_gates,
            "reason": reason,
            "suite_version": suite.version or None,  # docs/versions.md
            "shadow": marks.get("shadow") if marks else None,
            "backfill": marks.get("backfill") if marks else None,
            "redacted": redacted,
        }
        # a judge block is a JudgeBlock already: validation would keep that very instance
        if (judge_block is None or type(judge_block) is JudgeBlock) and plain_graded(values):
            return built_graded(values)
        return GradedResult(**values)

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
        return self._outcome(event, result, counters)

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
        # one encoder call a batch, for the outputs semantic_similarity did not embed already
        drifts = self.drift_samples([event for _, event, _ in routed], [s for _, _, s in routed])
        for (i, event, suite), drift in zip(routed, drifts, strict=True):
            raw, source = batch[i]
            try:
                result, counters = self.evaluate_sync(event, suite, received_at=received_at)
            except Exception as exc:
                found[i] = self._failed(raw, source, exc)
                continue
            # with the session turns, as process_sync
            found[i] = self._outcome(event, result, counters, drift=drift or False)
        return found

    def drift_samples(
        self, events: Sequence[RequestEvent], suites: Sequence[Suite] = ()
    ) -> list[DriftSample | None]:
        """The embedding-drift numbers of each event's output (None: off, or not sampled): the vectors the
        ``suites``' semantic_similarity evaluators embedded for this batch, the rest from one
        :meth:`~streameval.embedding.Encoder.encode_exact` call (either way, a text's vector does not
        depend on its batch)."""
        cfg = self.embedding_drift
        if cfg is None:
            return [None] * len(events)
        chosen = [e for e in events if drift_sampled(e.id, cfg.sample_rate)]
        if not chosen:
            return [None] * len(events)
        try:
            known: dict[str, Any] = {}
            for suite in {s.name: s for s in suites}.values():
                for bound in suite.evaluators:
                    if isinstance(bound.evaluator, SemanticSimilarity):
                        known.update(bound.evaluator.batch_vectors(cfg.folder))
            texts = sorted({e.output for e in chosen if e.output not in known})
            vectors = dict(zip(texts, encoder(cfg.folder).encode_exact(texts), strict=True)) if texts else {}
            vectors.update((e.output, known[e.output]) for e in chosen if e.output in known)
            return [
                sample(vectors[e.output], e.id, cfg) if drift_sampled(e.id, cfg.sample_rate) else None
                for e in events
            ]
        except Exception:  # the evaluation goes on without them
            log.warning("embedding drift: could not embed a batch's outputs", exc_info=True)
            return [None] * len(events)

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
        return self._outcome(event, result, counters)

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
        return self._outcome(event, result, counters)

    def _outcome(
        self,
        event: RequestEvent,
        result: GradedResult,
        counters: dict[str, dict[str, float]],
        *,
        drift: DriftSample | bool | None = None,
    ) -> Outcome:
        """``drift``: the event's drift numbers; False: none (not sampled); None: computed here if on."""
        sessions = self.suites.sessions
        turns = turns_of(sessions, event, result) if sessions else ()
        if drift is None and self.embedding_drift is not None:
            drift = self.drift_samples([event])[0]
        return result_outcome(result, counters, turns, drift if isinstance(drift, DriftSample) else None)

    def step(self, raw: bytes, source: Source) -> Outcome:
        """The outcome of an agent run's step (an input's step item: a tool or root span's document): its
        turns only, no result; never evaluated. Never raises for a bad step (a dead letter)."""
        try:
            document = orjson.loads(raw)
            return Outcome(turns=step_turns(self.suites.sessions, document, self.clock()))
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
