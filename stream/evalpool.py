"""Evaluation processes: a worker's CPU-bound evaluation on every core, its I/O on one.

A worker's event loop does the I/O (Kafka, Redis, judges) and the ordered publication. With
``STREAMEVAL_EVAL_PROCESSES`` = N > 0, the CPU-bound part of each batch — decode, route and the
synchronous evaluators — runs in N processes instead, one batch per process at a time (the worker
keeps several batches in flight, :mod:`streameval.inflight`). Events whose suite needs the event loop
(:meth:`Pipeline.runs_sync` is false: a judge panel, sandboxed code, registered evaluators) come back
as ``None`` and the worker evaluates them itself, as it does without processes. Results are the same
either way (tests/core/test_evalpool.py). Messages of the suite file's decoded inputs (``json``, OTLP
exports: :mod:`streameval.inputs`) are decoded in the processes too (:meth:`EvalPool.expand_evaluate`).

Processes are started with ``spawn`` (the worker has threads, e.g. Faust's consumer thread, and
forking a threaded process is unsafe); each parses the suite text the worker read and validated, so a
config change on disk cannot split a worker. Evaluator latencies measured in a process are handed back
with its batch and observed in the worker's ``/metrics``.

A process that dies (the OOM killer, a crash in a C extension) breaks the pool: every batch the pool
held is evaluated in the worker's own process instead, a new pool is started and an error is logged.
Nothing is lost or evaluated twice. When the worker dies, its evaluation processes exit too (Linux:
``PR_SET_PDEATHSIG``).

A program that starts a pool itself must guard its main module (``if __name__ == "__main__":``):
``spawn`` imports it in each process. ``streameval`` and ``python -m streameval`` are guarded.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from . import telemetry
from ._util import freeze_heap
from .config import LoadedConfig, parse_config_text
from .envelope import Outcome, Source
from .feature import Annotator
from .inputs import Inputs
from .pipeline import Pipeline

__all__ = ["Annotate", "EvalPool", "Expanded"]

Annotate = Callable[[LoadedConfig], Sequence[Annotator]]
"""The annotators of a process's pipeline, from the suites it parsed (:class:`EvalPool`)."""

log = logging.getLogger(__name__)

# -- in the evaluation process ----------------------------------------------------------------------
_pipeline: Pipeline | None = None
_inputs: Inputs | None = None


def _die_with_parent(parent: int) -> None:
    """Exit when the worker dies, even by SIGKILL (the OOM killer): no orphaned evaluation processes."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the worker died before prctl took effect
        os._exit(1)


def _init(
    parent: int,
    config_text: str,
    config_file: str,
    max_event_bytes: int,
    max_event_depth: int,
    annotate: Annotate | None = None,
) -> None:
    global _pipeline, _inputs
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the worker shuts us down
    _, suites = parse_config_text(config_text, file=config_file)
    _pipeline = Pipeline(
        suites,
        max_event_bytes=max_event_bytes,
        max_event_depth=max_event_depth,
        annotators=annotate(suites) if annotate is not None else (),
    )
    _inputs = Inputs(suites.inputs, max_depth=max_event_depth, steps=suites.assembles_spans)
    telemetry.capture_latencies()
    freeze_heap()  # configured: full collections skip the start-up heap for the process's lifetime


def _ready() -> bool:
    return _pipeline is not None


def _evaluate(
    batch: Sequence[tuple[bytes, Source]], received_at: float
) -> tuple[list[Outcome | None], list[tuple[str, float]]]:
    assert _pipeline is not None, "evaluation process not initialised"
    outcomes = _pipeline.process_sync_batch(batch, received_at)
    return outcomes, telemetry.take_captured()


Expanded = list[tuple[bytes, Source, Outcome | None]]


def _expand_evaluate(
    messages: Sequence[tuple[bytes, Source]], received_at: float
) -> tuple[Expanded, Any, Any]:
    assert _pipeline is not None and _inputs is not None, "evaluation process not initialised"
    items = list(_inputs.expand(messages))
    good = [(item.raw, item.source) for item in items if item.error is None and not item.step]
    evaluated = iter(_pipeline.process_sync_batch(good, received_at))
    out: Expanded = [
        (
            item.raw,
            item.source,
            _pipeline.failed(item.raw, item.source, item.error)
            if item.error is not None
            else _pipeline.step(item.raw, item.source)
            if item.step  # an agent run's step: annotations only (its turns)
            else next(evaluated),
        )
        for item in items
    ]
    return out, telemetry.take_captured(), telemetry.take_captured_spans()


# -- in the worker ----------------------------------------------------------------------------------
class EvalPool:
    """``processes`` evaluation processes for the suites in ``config_text`` (the file ``config_file``)."""

    def __init__(
        self,
        config_text: str,
        config_file: str,
        processes: int,
        *,
        max_event_bytes: int,
        max_event_depth: int,
        annotate: Annotate | None = None,
    ) -> None:
        """``annotate``: the annotators of each process's pipeline, from its suites (streameval.feature.Annotator;
        the composition root's, e.g. ``functools.partial(streameval.features.setup.annotators, embed_outputs=True)``:
        passed to the processes, so a module-level function or a partial of one)."""
        if processes < 1:
            raise ValueError("an evaluation pool needs at least one process")
        self.processes = processes
        self._initargs = (
            os.getpid(),
            config_text,
            config_file,
            max_event_bytes,
            max_event_depth,
            annotate,
        )
        self._executor: ProcessPoolExecutor | None = None
        self.restarts = 0

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init,
            initargs=self._initargs,
        )

    async def start(self) -> None:
        """Start every process now (spawning and importing takes about a second), not on the first batch."""
        if self._executor is not None:
            return
        self._executor = self._new_executor()
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._executor, _ready) for _ in range(self.processes)))
        log.info("%d evaluation process(es) ready", self.processes)

    async def close(self) -> None:
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: executor.shutdown(cancel_futures=True)
            )

    async def evaluate(
        self, batch: Sequence[tuple[bytes, Source]], received_at: float
    ) -> list[Outcome | None]:
        """One outcome per event, in order; ``None`` for an event the caller must evaluate itself."""
        executor = self._executor
        if executor is None:
            raise RuntimeError("EvalPool is not started; call start() first")
        try:
            outcomes, latencies = await asyncio.get_running_loop().run_in_executor(
                executor, _evaluate, list(batch), received_at
            )
        except BrokenProcessPool as exc:
            self._replace(executor, exc)
            return [None] * len(batch)
        except Exception:  # e.g. an outcome that would not pickle: the worker evaluates the batch itself
            log.exception("an evaluation process could not return a batch; evaluating it in the worker")
            return [None] * len(batch)
        telemetry.observe_latencies(latencies)
        return outcomes

    async def expand_evaluate(
        self, messages: Sequence[tuple[bytes, Source]], received_at: float
    ) -> Expanded | None:
        """Decode messages by their topic's input format and evaluate the request events, in the processes.

        ``(event bytes, source, outcome)`` per request event in order (an outcome is ``None`` when the
        caller must evaluate the event itself); ``None`` when the pool could not (the caller then
        decodes and evaluates the messages itself)."""
        executor = self._executor
        if executor is None:
            raise RuntimeError("EvalPool is not started; call start() first")
        try:
            found, latencies, spans = await asyncio.get_running_loop().run_in_executor(
                executor, _expand_evaluate, list(messages), received_at
            )
        except BrokenProcessPool as exc:
            self._replace(executor, exc)
            return None
        except Exception:
            log.exception("an evaluation process could not return a batch; evaluating it in the worker")
            return None
        telemetry.observe_latencies(latencies)
        for topic, llm, skipped in spans:
            telemetry.observe_spans(topic, llm=llm, skipped=skipped)
        return found

    def _replace(self, broken: ProcessPoolExecutor, exc: BaseException) -> None:
        if self._executor is not broken:  # another batch of the same pool got here first
            return
        self.restarts += 1
        log.error(
            "an evaluation process died (%s); its batches are evaluated in the worker and the pool is "
            "restarted (restart %d)",
            exc,
            self.restarts,
        )
        self._executor = self._new_executor()
        broken.shutdown(wait=False, cancel_futures=True)

    def pids(self) -> list[int]:
        """The processes' ids (for tests and diagnostics)."""
        processes: dict[Any, Any] = getattr(self._executor, "_processes", None) or {}
        return sorted(processes)
