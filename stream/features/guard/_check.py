"""One synchronous check (docs/guard.md): raw bytes of an event to a decision, within the suite's deadline.

:class:`Guard` holds a :class:`~streameval.pipeline.Pipeline` of the file's guarded suites only, each as the
guard runs it: without its judge panel unless ``judges: true`` (then the panel judges every check), without
model-based evaluators unless ``semantic: true``. An event is routed as the stream routes it (the same suite
file, the same rules), so the check runs the suite the stream would grade it in.

Deadline. The synchronous evaluators run at once; evaluators with a per-call time limit (``regex``) are
limited to what is left of the deadline (:data:`~streameval.signals.CHECK_DEADLINE`), the others are linear
in the text, which the field limit bounds. Asynchronous steps (sandboxed code, registered evaluators, the judge
panel) are cancelled at the deadline. A check that did not finish by its deadline answers the section's
``on_timeout``, saying so; it never waits longer.

Errors (:class:`CheckError`, each an HTTP status): ``BadCheck`` 400 (not strict JSON, not a request event,
a field over the limit; ``errors`` name the fields), ``CheckTooLarge`` 413, ``NoGuardedSuite`` 404.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from typing import Any, ClassVar, Protocol

import httpx
import orjson
from pydantic import ValidationError

from ..._util import clip, json_path, unknown_name
from ...config_loaded import LoadedConfig, Suite
from ...errors import EventError, EventTooLarge, InvalidJSON, StreamEvalError, UnroutableEvent
from ...models import GradedResult, RequestEvent
from ...pipeline import Pipeline
from ...signals import CHECK_DEADLINE, CheckDeadline
from ...strictjson import loads_strict
from ._config import MODEL_EVALUATORS, GuardConfig, guard_section
from ._decide import decide

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TEXT_CHARS",
    "BadCheck",
    "CheckError",
    "CheckTooLarge",
    "Guard",
    "NoGuardedSuite",
    "Publisher",
]

log = logging.getLogger("streameval.guard")

DEFAULT_MAX_BODY_BYTES = 256 * 1024
DEFAULT_MAX_TEXT_CHARS = 64 * 1024
_TEXT_FIELDS = ("input", "output", "expected")


class CheckError(StreamEvalError):
    """A check refused before any evaluator ran: its HTTP status, message and ``[{path, message}]``."""

    status: ClassVar[int] = 400

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or [{"path": "$", "message": message}]


class BadCheck(CheckError):
    status = 400


class CheckTooLarge(CheckError):
    status = 413


class NoGuardedSuite(CheckError):
    status = 404


class Publisher(Protocol):
    """Where checked events go when a suite says ``publish: true`` (the requests topic, acknowledged)."""

    async def send(self, key: bytes, value: bytes) -> None: ...

    async def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class _Guarded:
    suite: Suite  #: as the guard runs it
    guard: GuardConfig
    gates: frozenset[str]
    skipped: tuple[str, ...]  #: evaluators the guard leaves out (model-based ones without ``semantic``)


def _as_guarded(suite: Suite) -> _Guarded:
    guard = guard_section(suite)  # only suites with a guard section come here
    assert guard is not None
    judge = suite.config.judge
    if judge is not None:  # the panel judges every check it is allowed to; its sample rate is the stream's
        judge = judge.model_copy(update={"sample_rate": 1.0}) if guard.judges else None
    kept = tuple(b for b in suite.evaluators if guard.semantic or b.evaluator.name not in MODEL_EVALUATORS)
    skipped = tuple(b.name for b in suite.evaluators if b not in kept)
    ran = dataclasses.replace(suite, config=suite.config.model_copy(update={"judge": judge}), evaluators=kept)
    return _Guarded(ran, guard, frozenset(b.name for b in kept if b.gate), skipped)


class Guard:
    """The checks of one suite file's guarded suites (module docstring). ``start()`` before the first check,
    ``close()`` after the last."""

    def __init__(
        self,
        suites: LoadedConfig,
        *,
        publisher: Publisher | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        log_texts: bool = False,
        judge_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.routing = suites
        self.guarded = {s.name: _as_guarded(s) for s in suites.all if guard_section(s) is not None}
        if not self.guarded:
            raise ValueError("the suite file has no guard: section; nothing to check against")
        loaded = LoadedConfig([g.suite for g in self.guarded.values()], suites.judges)
        loaded.redact = suites.redact
        self.pipeline = Pipeline(loaded, max_event_bytes=max_body_bytes, judge_transport=judge_transport)
        self.publisher = publisher
        self.publishes = any(g.guard.publish for g in self.guarded.values())
        self.max_body_bytes = max_body_bytes
        self.max_text_chars = max_text_chars
        self.log_texts = log_texts

    @property
    def names(self) -> list[str]:
        return sorted(self.guarded)

    async def start(self) -> None:
        await self.pipeline.start()

    async def close(self) -> None:
        await self.pipeline.close()
        if self.publisher is not None:
            await self.publisher.close()

    # -- decode -------------------------------------------------------------------------------
    def event(self, raw: bytes, suite: str | None = None) -> tuple[RequestEvent, bytes]:
        """The request event of ``raw`` (an ``id`` made when it has none) and its bytes as published."""
        if len(raw) > self.max_body_bytes:
            raise CheckTooLarge(f"the body is {len(raw)} bytes; the limit is {self.max_body_bytes}")
        try:
            event = self.pipeline.decode(raw)
        except EventTooLarge as exc:
            raise CheckTooLarge(exc.reason) from None
        except EventError as exc:
            event, raw = self._without_id(raw, exc)
        for name in _TEXT_FIELDS:
            text = getattr(event, name)
            if text is not None and len(text) > self.max_text_chars:
                raise BadCheck(
                    f"$.{name} holds {len(text)} characters; the limit is {self.max_text_chars}",
                    [{"path": f"$.{name}", "message": f"longer than {self.max_text_chars} characters"}],
                )
        if suite is not None and suite != event.suite:
            event = event.model_copy(update={"suite": suite})
        return event, raw

    def _without_id(self, raw: bytes, first: EventError) -> tuple[RequestEvent, bytes]:
        """An event that failed to decode: strict JSON lacking only its ``id`` gets one; anything else is a
        400 naming the fields (pydantic's paths)."""
        try:
            document = loads_strict(raw)
        except InvalidJSON as exc:
            raise BadCheck(exc.reason) from None
        if isinstance(document, dict) and "id" not in document:
            document["id"] = uuid.uuid4().hex
            try:
                raw = orjson.dumps(document)
                return self.pipeline.decode(raw), raw
            except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits, which orjson cannot write
                raise BadCheck(f"not a request event: {exc}") from None
            except EventError as exc:
                first = exc
        try:
            RequestEvent.model_validate_json(raw)
        except ValidationError as exc:
            errors = [
                {"path": json_path(e["loc"]), "message": clip(e["msg"], 200)}
                for e in exc.errors(include_url=False)[:10]
            ]
            raise BadCheck(f"not a request event: {first.reason}", errors) from None
        raise BadCheck(f"not a request event: {first.reason}")

    def route(self, event: RequestEvent) -> _Guarded:
        try:
            suite = self.routing.route(event)
        except UnroutableEvent as exc:
            if exc.kind == "unknown_suite":
                raise NoGuardedSuite(unknown_name("suite", event.suite or "", self.guarded)) from None
            raise NoGuardedSuite(f"{exc.reason}; guarded suites: {', '.join(self.names)}") from None
        guarded = self.guarded.get(suite.name)
        if guarded is None:
            raise NoGuardedSuite(
                f"suite {suite.name!r} has no guard: section; guarded suites: {', '.join(self.names)}"
            )
        return guarded

    # -- check --------------------------------------------------------------------------------
    async def check(
        self, raw: bytes, *, suite: str | None = None, caller: str | None = None
    ) -> dict[str, Any]:
        """The answer to one check (docs/guard.md, "The answer"). Raises :class:`CheckError`."""
        started = time.monotonic()
        event, sent = self.event(raw, suite)
        guarded = self.route(event)
        guard = guarded.guard
        deadline = started + guard.deadline_ms / 1000
        publishing = None
        if guard.publish and self.publisher is not None:
            publishing = asyncio.ensure_future(self.publisher.send(event.id.encode(), sent))
        budget = CheckDeadline(deadline)
        result = await self._evaluate(event, guarded.suite, budget)
        masked = None
        if result is not None and guard.mask:
            masked = self._masked(event, guarded.suite.name)
        # done, but too late (or a step was cut short by the deadline): on_timeout too
        late = result is not None and (budget.cut or time.monotonic() > deadline)
        answer = self._answer(event, guarded, None if late else result, masked)
        if late and result is not None:  # what the evaluators said, for the record
            answer["evaluators"] = _evaluators(result)
        if publishing is not None:
            answer["published"] = await self._published(publishing, deadline)
        answer["latencyMs"] = round((time.monotonic() - started) * 1000, 3)
        self._log(event, answer, caller)
        return answer

    async def _evaluate(
        self, event: RequestEvent, suite: Suite, deadline: CheckDeadline
    ) -> GradedResult | None:
        token = CHECK_DEADLINE.set(deadline)
        try:
            if self.pipeline.runs_sync(suite):
                return self.pipeline.evaluate_sync(event, suite, received_at=time.time())[0]
            try:
                async with asyncio.timeout_at(deadline.at):  # the loop's clock is time.monotonic
                    return (await self.pipeline.evaluate(event, suite, received_at=time.time()))[0]
            except TimeoutError:
                return None
        finally:
            CHECK_DEADLINE.reset(token)

    def _masked(self, event: RequestEvent, suite: str) -> str | None:
        """The output as the suite's redaction leaves it, when that changed it (else None)."""
        if self.pipeline.redactors is None:
            return None
        text = self.pipeline.redactors.texts(suite, [event.output])[0]
        return None if text is None or text == event.output else text

    async def _published(self, publishing: asyncio.Future[None], deadline: float) -> bool:
        """Whether the broker acknowledged the event by the deadline (the send goes on after it)."""
        done, _ = await asyncio.wait({publishing}, timeout=max(deadline - time.monotonic(), 0.0))
        if not done:
            publishing.add_done_callback(_log_failure)
            return False
        if publishing.exception() is not None:
            _log_failure(publishing)
            return False
        return True

    def _answer(
        self, event: RequestEvent, guarded: _Guarded, result: GradedResult | None, masked: str | None
    ) -> dict[str, Any]:
        guard = guarded.guard
        answer: dict[str, Any] = {"id": event.id, "suite": guarded.suite.name}
        if result is None:
            mode = "open" if guard.on_timeout == "allow" else "closed"
            answer.update(
                decision=guard.on_timeout,
                timedOut=True,
                failMode=mode,
                score=None,
                passed=None,
                threshold=guarded.suite.config.threshold,
                reasons=[
                    f"no answer within the deadline of {guard.deadline_ms:g} ms: "
                    f"fail {mode} (on_timeout: {guard.on_timeout})"
                ],
                evaluators=[],
            )
        else:
            verdict = decide(result, guard, guarded.gates)
            decision = verdict.decision
            if masked is not None and decision != "block":
                decision = "mask"
            answer.update(
                decision=decision,
                timedOut=False,
                failMode=None,
                score=result.score,
                passed=result.passed,
                threshold=result.threshold,
                reasons=list(verdict.reasons),
                evaluators=_evaluators(result),
            )
            if result.judge is not None:
                judge = result.judge
                answer["judge"] = {"status": judge.status, "score": judge.final_score, "reason": judge.reason}
            if masked is not None and decision == "mask":
                answer["output"] = masked
        answer["onTimeout"] = guard.on_timeout
        if guarded.skipped:
            answer["skipped"] = list(guarded.skipped)
        return answer

    def _log(self, event: RequestEvent, answer: dict[str, Any], caller: str | None) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        text = f" output={event.output!r}" if self.log_texts else ""
        log.info(
            "check id=%s suite=%s caller=%s decision=%s %.2f ms%s",
            event.id,
            answer["suite"],
            caller or "-",
            answer["decision"],
            answer["latencyMs"],
            text,
        )


def _evaluators(result: GradedResult) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "score": e.score, "passed": e.passed, "reason": e.reason, "error": e.error}
        for e in result.evaluators
    ]


def _log_failure(publishing: asyncio.Future[None]) -> None:
    if publishing.cancelled():
        return
    exc = publishing.exception()
    if exc is not None:
        log.warning("a checked event was not published: %s: %s", type(exc).__name__, exc)
