"""A batch of messages to outcomes, in order: decode (:mod:`streameval.inputs`), evaluate through the
shared :class:`~streameval.pipeline.Pipeline`, in the evaluation processes when there is a pool
(:class:`~streameval.evalpool.EvalPool`), judged events on the event loop.

The stream worker (:class:`~streameval.processor.Processor`) and ``streameval evaluate``
(:mod:`streameval.offline`) both go through here, so the two give the same outcomes.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from .envelope import Outcome, Source
from .evalpool import EvalPool
from .inputs import Inputs, Item
from .pipeline import Pipeline

__all__ = ["SLICE_S", "Ready", "evaluate_batch", "evaluate_items", "evaluate_messages", "finish_batch"]

#: the longest the event loop is held by synchronous evaluation (no evaluation processes) before it turns:
#: the consumer's heartbeats, the closers' timers and /metrics run in between. A batch of events dearer than
#: this (an embedding model, a big rule set) is evaluated in slices sized from what an event cost so far
SLICE_S = 0.05
#: events in the first slice of a pipeline whose cost is not known yet (it is measured on them)
_FIRST_SLICE = 1
#: seconds of synchronous evaluation per event, per pipeline (the last slice's, smoothed)
_COST: weakref.WeakKeyDictionary[Pipeline, float] = weakref.WeakKeyDictionary()
_clock = time.perf_counter  # what a slice cost (the tests give their own clock)


async def evaluate_messages(
    pipeline: Pipeline,
    inputs: Inputs,
    messages: Sequence[tuple[bytes, Source]],
    pool: EvalPool | None = None,
    *,
    ready: Callable[[list[Source], list[Outcome | None]], Awaitable[None]] | None = None,
) -> tuple[list[Source], list[Outcome]]:
    """Decode a batch of messages and evaluate its request events: (source, outcome) of each, in order.

    With ``pool`` and inputs that need decoding, the evaluation processes decode too (decoding an OTLP
    export costs more than evaluating a simple suite); events whose suite needs the event loop come back
    and are evaluated here, as in :func:`evaluate_batch`. ``ready(sources,
    outcomes)``, when given, is awaited once every event that calls no judge has its outcome (the
    judged ones are ``None`` there), before the judged ones are awaited
    (:func:`finish_batch`).
    """
    if pool is not None and inputs.decodes:
        received_at = pipeline.clock()
        found = await pool.expand_evaluate(messages, received_at)
        if found is not None:
            sources = [source for _, source, _ in found]
            quick = None if ready is None else (lambda outcomes: ready(sources, outcomes))
            outcomes = await finish_batch(
                pipeline,
                [(raw, source) for raw, source, _ in found],
                [outcome for _, _, outcome in found],
                received_at,
                quick,
            )
            return sources, outcomes
    items = inputs.expand(messages)
    sources = [item.source for item in items]
    quick = None if ready is None else (lambda outcomes: ready(sources, outcomes))
    return sources, await evaluate_items(pipeline, items, pool, ready=quick)


async def evaluate_items(
    pipeline: Pipeline,
    items: Sequence[Item],
    pool: EvalPool | None = None,
    *,
    ready: Callable[[list[Outcome | None]], Awaitable[None]] | None = None,
) -> list[Outcome]:
    """One outcome per item, in order: decoded events through :func:`evaluate_batch`,
    items that could not be decoded straight to their dead letters, steps of agent runs to their annotations. ``ready``: as in that function, with
    one outcome per item."""
    good_at = [i for i, item in enumerate(items) if item.error is None and not item.step]
    out: list[Outcome | None] = [
        pipeline.failed(item.raw, item.source, item.error)
        if item.error is not None
        else pipeline.step(item.raw, item.source)
        if item.step  # an agent run's step: annotations only (its turns)
        else None
        for item in items
    ]

    async def quick(found: list[Outcome | None]) -> None:
        assert ready is not None
        for i, outcome in zip(good_at, found, strict=True):
            out[i] = outcome
        await ready(list(out))

    if good_at:
        good = [(items[i].raw, items[i].source) for i in good_at]
        done = await evaluate_batch(pipeline, good, pool, ready=None if ready is None else quick)
        for i, outcome in zip(good_at, done, strict=True):
            out[i] = outcome
    elif ready is not None:
        await ready(list(out))
    return cast("list[Outcome]", out)


Ready = Callable[[list[Outcome | None]], Awaitable[None]]
"""Called with the outcomes known before any judge answers (``None`` for an event still being judged)."""


async def evaluate_batch(
    pipeline: Pipeline,
    batch: Sequence[tuple[bytes, Source]],
    pool: EvalPool | None = None,
    *,
    ready: Ready | None = None,
) -> list[Outcome]:
    """One outcome per event, in order: the stream worker's and ``streameval evaluate``'s batch step.

    Synchronous suites are evaluated in ``pool``'s processes when given, else right here without a task
    per event; the rest (judge panels, sandboxed code, registered evaluators) concurrently on the loop.
    With ``ready``, see :func:`finish_batch`.
    """
    received_at = pipeline.clock()
    if pool is not None:
        found = await pool.evaluate(batch, received_at)
    else:
        found = await _in_slices(pipeline, batch, received_at)
    return await finish_batch(pipeline, batch, found, received_at, ready)


async def _in_slices(
    pipeline: Pipeline, batch: Sequence[tuple[bytes, Source]], received_at: float
) -> list[Outcome | None]:
    """``pipeline.process_sync_batch`` over ``batch`` in slices of about :data:`SLICE_S` each, the loop
    turning between them; the whole batch in one call while its events are cheap (the common case). An
    event's outcome does not depend on the slice it is in: the same ``received_at`` for all, and the
    embedding model's vectors do not depend on their batch (streameval.embedding)."""
    cost = _COST.get(pipeline)
    found: list[Outcome | None] = []
    start = 0
    while start < len(batch):
        left = len(batch) - start
        if cost is None:
            size = min(left, _FIRST_SLICE)
        elif cost * left <= SLICE_S:
            size = left
        else:
            size = max(1, int(SLICE_S / cost))
        if start:
            await asyncio.sleep(0)  # the loop's turn: heartbeats, timers, other batches' judges
        began = _clock()
        found += pipeline.process_sync_batch(batch[start : start + size], received_at)
        spent = (_clock() - began) / size
        cost = spent if cost is None else (cost + spent) / 2
        start += size
    if cost is not None:
        _COST[pipeline] = cost
    return found


async def finish_batch(
    pipeline: Pipeline,
    batch: Sequence[tuple[bytes, Source]],
    found: list[Outcome | None],
    received_at: float,
    ready: Ready | None = None,
) -> list[Outcome]:
    """Evaluate the events of ``batch`` whose outcome in ``found`` is ``None``, concurrently; all outcomes.

    With ``ready``, it is awaited once every event that calls no judge (:meth:`Pipeline.may_judge`)
    has its outcome, before the judged ones are awaited: the stream worker records and publishes those
    at once, so a slow judge never delays a rule result.
    """
    rest = [i for i, outcome in enumerate(found) if outcome is None]
    if ready is None:
        if rest:
            done = await asyncio.gather(*(pipeline.process(*batch[i], received_at=received_at) for i in rest))
            for i, outcome in zip(rest, done, strict=True):
                found[i] = outcome
        return cast(list[Outcome], found)
    quick: list[tuple[int, Awaitable[Outcome]]] = []
    judged: list[tuple[int, Awaitable[Outcome]]] = []
    for i in rest:
        work, may_judge = pipeline.begin(*batch[i], received_at=received_at)
        (judged if may_judge else quick).append((i, work))
    later = asyncio.gather(*(work for _, work in judged))
    try:
        for (i, _), outcome in zip(quick, await asyncio.gather(*(work for _, work in quick)), strict=True):
            found[i] = outcome
        await ready(list(found))
        for (i, _), outcome in zip(judged, await later, strict=True):
            found[i] = outcome
    finally:
        later.cancel()  # only when something above raised or we were cancelled: done otherwise
    return cast(list[Outcome], found)
