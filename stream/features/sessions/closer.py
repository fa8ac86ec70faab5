"""Closing sessions: each session judged once per revision across every worker, then published.

The worker calls :meth:`SessionCloser.run_once` every ``close_interval_s`` (the window closer's timer,
``streameval.agents``). Each run:

1. reads each due-index shard for sessions whose deadline passed on the Redis clock (``LIMIT``: the cost
   of a run does not grow with the number of open sessions);
2. claims each one (its lease, ``SET NX PX`` inside the claim script, streameval.features.sessions.scripts); only
   the claimer goes on: a session is closed by one worker;
3. builds the thread event (streameval.features.sessions.thread) and evaluates it with the session's scoring
   through :meth:`streameval.pipeline.Pipeline.evaluate` (rules, judge panel, combine, gates, grades);
4. records it through :meth:`streameval.store.ResultStore.record_many` as pair model x session name,
   idempotent by its id (``session:key#revision``) and turn ids; a revision also retracts the previous
   revision's figures in the same call, so the aggregates hold the latest revision only;
5. publishes the :class:`~streameval.models.SessionResult` on ``evals.sessions`` (the stored one when a
   crashed worker had recorded it already) with, when the suite file has ``review:``, its review item
   (a new result worth a person's look, with its thread: :class:`Reviewer`), then marks the session closed
   and drops its due entry (one script: the entry is in the session's shard,
   streameval.features.sessions.state).

While a session is being closed its worker extends the lease every third of ``lease_s`` (judging may take
longer than the lease). A worker killed between 2 and 5 leaves its lease to expire: the next worker closes the
session then, finds the result recorded and publishes the stored bytes again (at least once on the
topic, once in the figures).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson

from ... import telemetry
from ..._version import __version__
from ...config import Session
from ...envelope import Outcome
from ...errors import StoreUnavailable
from ...models import GradedResult, SessionMetrics, SessionResult, format_time
from ...outputs import Publish, Send, publish_all
from ...pipeline import Pipeline
from ...redis_client import retry_forever
from ...store import ResultStore
from .state import Claim, SessionStore
from .thread import thread_event, thread_turns

__all__ = [
    "MAX_CLOSE_S",
    "Reviewer",
    "SessionCloser",
    "build_result",
    "content_of",
    "evaluate_thread",
    "graded_of",
    "judged",
    "once",
]

log = logging.getLogger(__name__)

#: the longest one session's closing may take (its judges' attempts and waits included) before it is given up
#: as hung; its lease is kept until then. The tick itself is not bounded (agents.app)
MAX_CLOSE_S = 600.0


async def evaluate_thread(
    pipeline: Pipeline,
    session: Session,
    key: str,
    revision: int,
    turns: list[dict[str, Any]],
    received: int,
    closed_by: str,
    closed_at: float,
    *,
    received_at: float,
) -> tuple[GradedResult, SessionResult, dict[str, dict[str, float]]]:
    """Judge one session's thread; the graded form (recorded), the session result (published), counters."""
    event, metrics = thread_event(session.name, key, session.config.category, revision, turns, received)
    graded, counters = await pipeline.evaluate(event, session.suite, received_at=received_at)
    return (
        graded,
        build_result(graded, session.name, key, revision, turns, metrics, closed_by, closed_at),
        counters,
    )


class Reviewer(Protocol):
    """Sends new session results worth a person's look for review (streameval.features.review.step)."""

    async def sessions(
        self, closed: Sequence[tuple[GradedResult, bytes, list[dict[str, str]]]]
    ) -> list[Publish]:
        """The review messages of ``(graded result, its thread event's bytes, its thread)``."""
        ...


def once(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The thread's turns, each id once (the first in thread order). The append script appends a turn
    once, looking up the turns it cannot vouch are new; a turn whose result was counted afresh under
    another pair (another suite version, or the same id with other content) is vouched for and could
    be there twice (streameval.features.sessions.scripts, APPEND)."""
    if len({t["id"] for t in turns}) == len(turns):
        return turns
    seen: set[str] = set()
    out = []
    for turn in turns:
        if turn["id"] not in seen:
            seen.add(turn["id"])
            out.append(turn)
    return out


def judged(turns: Sequence[dict[str, Any]]) -> bool:
    """Whether a closed session has something to judge: at least one scored turn (an LLM call). An agent
    run (``assemble: spans``) of a trace with no LLM span, only tool or root spans, has none: it closes
    without a result."""
    return any(t.get("score") is not None for t in turns)


def build_result(
    graded: GradedResult,
    session: str,
    key: str,
    revision: int,
    turns: list[dict[str, Any]],
    metrics: dict[str, Any],
    closed_by: str,
    closed_at: float,
) -> SessionResult:
    return SessionResult(
        id=graded.id,
        session=session,
        key=key,
        model=graded.model,
        models=list(dict.fromkeys(t["model"] for t in turns if t.get("model"))),
        category=graded.category,
        turn_ids=[t["id"] for t in turns],
        first_event_time=format_time(turns[0]["t"]),
        last_event_time=format_time(turns[-1]["t"]),
        closed_by=closed_by,  # type: ignore[arg-type]
        closed_at=format_time(closed_at),
        revision=revision,
        truncated=metrics["dropped"] > 0,
        metrics=SessionMetrics(**metrics),
        score=graded.score,
        passed=graded.passed,
        threshold=graded.threshold,
        grade=graded.grade,
        evaluators=graded.evaluators,
        judge=graded.judge,
        failed_gates=graded.failed_gates,
        reason=graded.reason,
        evaluated_at=graded.evaluated_at,
        latency_ms=graded.latency_ms,
        pipeline_version=__version__,
        suite_version=graded.suite_version,
        backfill=graded.backfill,
    )


def graded_of(result: SessionResult) -> GradedResult:
    """The graded form a session result was recorded as (:meth:`SessionCloser.close`)."""
    return GradedResult(
        id=result.id,
        model=result.model,
        suite=result.session,
        category=result.category,
        score=result.score,
        passed=result.passed,
        threshold=result.threshold,
        grade=result.grade,
        evaluators=result.evaluators,
        event_time=result.last_event_time,
        evaluated_at=result.evaluated_at,
        latency_ms=result.latency_ms,
        pipeline_version=result.pipeline_version,
        judge=result.judge,
        failed_gates=result.failed_gates,
        reason=result.reason,
        suite_version=result.suite_version,
        backfill=result.backfill,
    )


def content_of(turn_ids: Sequence[str], revision: int) -> bytes:
    """What tells one closing of a session from another for the store's idempotency: the judged turns."""
    return f"{revision}\0".encode() + "\0".join(turn_ids).encode()


class SessionCloser:
    """Closes due sessions exactly once across workers (module docstring)."""

    def __init__(
        self,
        state: SessionStore,
        store: ResultStore,
        pipeline: Pipeline,
        sessions: Sequence[Session],
        *,
        limit: int = 256,
        concurrency: int = 32,
        clock: Callable[[], float] | None = None,
        max_close_s: float = MAX_CLOSE_S,
        review: Reviewer | None = None,
    ) -> None:
        """``review``: built when the suite file has ``review:``."""
        self.state = state
        self.review = review
        self.max_close_s = max_close_s
        self.store = store
        self.pipeline = pipeline
        self.sessions = {s.name: s for s in sessions}
        self.limit = limit
        self._gate = asyncio.Semaphore(concurrency)
        self._clock = clock

    async def run_once(self, send: Send) -> int:
        """Close every due session; returns how many results this worker published."""
        seconds, micros = await self.state.client.time()
        now = float(seconds) + float(micros) / 1e6
        due = await self.state.due(now, self.limit)
        if not due:
            return 0
        done = await asyncio.gather(*(self._guarded(tag, score, send) for tag, score in due))
        return sum(done)

    async def _guarded(self, tag: str, score: float, send: Send) -> int:
        async with self._gate:
            try:
                return await asyncio.wait_for(self.close(tag, score, send), timeout=self.max_close_s)
            except (
                TimeoutError
            ):  # a hang: the closing is dropped, its lease runs out, a later claim tries again
                log.error(
                    "closing session %s took longer than %g s; given up, it is tried again once its lease "
                    "expires",
                    tag,
                    self.max_close_s,
                )
                return 0
            except StoreUnavailable:
                raise  # Redis is down: the tick fails and the next one tries again
            except Exception:  # one session's failure costs only itself: tried again once its lease expires
                log.exception("closing session %s failed; it is tried again once its lease expires", tag)
                return 0

    async def close(self, tag: str, score: float, send: Send) -> int:
        claim = await self.state.claim(tag, score)
        if not isinstance(claim, Claim):  # gone, closed, busy, or later: the claim moved its due entry
            return 0
        # the lease is kept while the session is judged: judges may take longer than the lease, and a
        # closing whose lease ran out would be taken over, and judged again, by the next claimer
        keeper = asyncio.create_task(self._keep(claim))
        try:
            return await self._close(claim, score, send)
        finally:
            keeper.cancel()

    async def _reviewed(
        self, session: Session, claim: Claim, graded: GradedResult, turns: list[dict[str, Any]], received: int
    ) -> list[Publish]:
        assert self.review is not None
        event, _ = thread_event(
            session.name, claim.key, session.config.category, claim.revision, turns, received
        )
        # the event as the page keeps it: its texts, not the transcript (the thread below is the turns)
        raw = event.model_copy(update={"metadata": {}}).model_dump_json(exclude_none=True).encode()
        return await self.review.sessions([(graded, raw, thread_turns(turns))])

    async def _keep(self, claim: Claim) -> None:
        """Extend ``claim``'s lease every third of it until cancelled or lost; a Redis error is retried at
        the next beat (the lease may run out meanwhile: then another worker takes over, which is safe)."""
        beat = self.state.lease_ms / 3000
        while True:
            await asyncio.sleep(beat)
            try:
                if not await self.state.renew(claim.tag):
                    return
            except Exception as exc:
                log.warning(
                    "session %s:%s: extending the closing lease failed: %r", claim.session, claim.key, exc
                )

    async def _close(self, claim: Claim, score: float, send: Send) -> int:
        tag = claim.tag
        session = self.sessions.get(claim.session)
        if session is None:  # a session removed from the suite file: forget its state's index entry
            log.warning("session %r is no longer configured; dropping its due entry", claim.session)
            await self.state.move(tag, score, None)
            return 0
        turns = once([orjson.loads(t) for t in claim.turns])
        received = claim.received - (len(claim.turns) - len(turns))
        closed_by = claim.closed_by
        if not judged(turns):  # an agent run of steps only (a trace with no LLM span): nothing to judge
            telemetry.SESSIONS_CLOSED.labels(claim.session, "unjudged").inc()
            await self.state.finish(claim, score, claim.previous or b"", closed_by)
            return 0
        graded, result, counters = await evaluate_thread(
            self.pipeline,
            session,
            claim.key,
            claim.revision,
            turns,
            received,
            closed_by,
            claim.now,
            received_at=self._clock() if self._clock else claim.now,
        )
        encoded = result.model_dump_json().encode()
        retractions: list[tuple[GradedResult, bytes, dict[str, dict[str, float]] | None, bytes]] = []
        if claim.revision > 0 and claim.previous:
            previous = orjson.loads(claim.previous)
            old = GradedResult.model_validate(previous["graded"])
            retractions.append(
                (old.model_copy(update={"id": old.id + "~"}), b"", previous["counters"], b"retract")
            )
        stored = await retry_forever(
            lambda: self.store.record_many(
                [(graded, encoded, counters, content_of(result.turn_ids, claim.revision))],
                retractions=retractions,
            ),
            what="recording a session result in Redis",
        )
        value = encoded
        if stored[0] is not None:  # counted before (a worker died closing it): publish what was counted
            value = stored[0]
            # the version of the pair it was counted under (docs/versions.md): a later retraction goes there
            # too (a result stored before session results carried their version: this session's)
            stored_graded = graded_of(SessionResult.model_validate_json(value))
            graded = stored_graded.model_copy(
                update={"suite_version": stored_graded.suite_version or session.suite.version or None}
            )
        else:  # /metrics: results, quality series and judge activity by model x session name, per revision
            telemetry.observe_outcomes([Outcome(result=graded, counters=counters)])
        messages = [Publish("session", f"{claim.session}:{claim.key}".encode(), value)]
        if stored[0] is None and self.review is not None:  # a new result (never a repeat) worth a look
            messages += await self._reviewed(session, claim, graded, turns, received)
        # on the broker before the session is marked closed: a worker killed in between leaves it to be
        # closed (and published) again, never a closed session whose result never reached the topic
        await publish_all(send, messages)
        telemetry.SESSIONS_CLOSED.labels(claim.session, closed_by).inc()
        telemetry.SESSION_CLOSE_DELAY.observe(max(0.0, claim.now - score / 1000))  # the index holds ms
        counted = orjson.dumps({"graded": graded.model_dump(mode="json"), "counters": counters})
        # closed (its due entry dropped), or reopened: turns came in while closing (their own appends set the
        # entry, else it moves to their deadline); lost: our lease ran out, the entry is the next worker's
        status, _ = await self.state.finish(claim, score, counted, closed_by)
        if status == "lost":  # our lease ran out and another worker closes it: its entry is that worker's
            log.warning(
                "session %s:%s: the closing lease expired before the result was marked; another worker "
                "takes over",
                claim.session,
                claim.key,
            )
        return 1
