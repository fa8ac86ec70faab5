"""``streameval evaluate``: the stream pipeline over a JSONL file, no broker, no Redis.

Every line is one raw event, exactly as it would be on ``evals.requests``. Results go to the output
file in the graded-result schema, in input order; lines that cannot be evaluated go to the
dead-letter file with their raw bytes and the reason (source = file name and line number). An id seen
earlier in the file re-emits the first result, as the stream's idempotency does.

With a ``decoder`` (``streameval evaluate --input-topic``), each line is read as that input's format
(a ``json`` input's mapped documents, or one OTLP/JSON export per line, as the Collector's file exporter
writes them) instead of as a request event.
"""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import BinaryIO, cast

from .batch import evaluate_batch, evaluate_items, finish_batch
from .envelope import Outcome, line_source
from .evalpool import EvalPool
from .features.sessions.local import LocalSessions
from .features.sessions.turns import KEY as TURNS
from .features.sessions.turns import turns_in
from .features.setup import annotators
from .inputs import Decoder
from .judges import prices_of
from .models import encode_result
from .pipeline import Pipeline
from .summary import Summary

__all__ = ["check_writable", "evaluate_file", "iter_lines"]


def check_writable(path: Path) -> str | None:
    """None when ``path`` can be written, else why not, in a few words. Leaves no file behind."""
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
        if not existed:
            path.unlink()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def iter_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw bytes)`` of every non-blank line, without its line ending."""
    for number, line in enumerate(handle, start=1):
        raw = line.rstrip(b"\r\n")
        if raw and not raw.isspace():  # what raw.strip() tells, without copying the line
            yield number, raw


async def evaluate_file(
    pipeline: Pipeline,
    input_path: Path,
    output_path: Path,
    deadletter_path: Path,
    *,
    concurrency: int = 64,
    processes: int = 0,
    config_text: str | None = None,
    config_file: str = "<config>",
    on_progress: Callable[[int, int], None] | None = None,
    decoder: Decoder | None = None,
    sessions_path: Path | None = None,
) -> Summary:
    """Evaluate ``input_path`` into ``output_path`` / ``deadletter_path``; returns the summary.

    ``concurrency`` events are evaluated at once (their async evaluators overlap); output order is
    input order. With ``processes`` > 0 (and the suites' ``config_text``), synchronous suites are
    evaluated in that many processes, one chunk of ``concurrency`` events each at a time
    (:mod:`streameval.evalpool`). ``on_progress(done, bytes_read)`` is called after each chunk.

    When the suite file has ``sessions:``, every session is closed at the end of the file and its result
    written to ``sessions_path`` (one session result per line; streameval.features.sessions.local): build
    ``pipeline`` with the suites' annotators then (``annotators=streameval.features.setup.annotators(suites)``),
    which note each event's turns.
    """
    if pipeline.suites.sessions and not any(a.key == TURNS for a in pipeline.annotators):
        raise ValueError(
            "the suite file has sessions: build the pipeline with its annotators "
            "(Pipeline(suites, annotators=streameval.features.setup.annotators(suites)))"
        )
    pool = None
    if processes:
        if config_text is None:
            raise ValueError("evaluation processes need the suites' config_text")
        pool = EvalPool(
            config_text,
            config_file,
            processes,
            max_event_bytes=pipeline.decoder.max_event_bytes,
            max_event_depth=pipeline.decoder.max_event_depth,
            annotate=annotators,  # the sessions' turns, as the pipeline's (streameval.features.setup)
        )
    hub = pipeline.judges
    summary = Summary(prices=prices_of({n: j.config for n, j in hub.judges.items()}) if hub else {})
    seen: dict[str, bytes] = {}
    sessions = LocalSessions(pipeline.suites.sessions) if pipeline.suites.sessions else None
    source_name = f"file:{input_path.name}"
    # chunks in flight: one per evaluation process + 1 (so none waits for the next chunk), else one
    pending: deque[tuple[int, asyncio.Future[list[Outcome]]]] = deque()
    await pipeline.start()
    try:
        if pool is not None:
            await pool.start()
        with input_path.open("rb") as src, output_path.open("wb") as out, deadletter_path.open("wb") as dead:

            def write(outcomes: list[Outcome]) -> None:
                for outcome in outcomes:
                    if outcome.result is not None:
                        result = outcome.result
                        if result.id in seen:
                            out.write(seen[result.id] + b"\n")
                            continue
                        encoded = encode_result(result)
                        seen[result.id] = encoded
                        if sessions is not None:
                            sessions.add(turns_in(outcome.annotations))
                        summary.add(result)
                        out.write(encoded + b"\n")
                    elif outcome.dead_letter is not None:
                        summary.dead_letters[outcome.dead_letter.kind] += 1
                        dead.write(outcome.dead_letter.model_dump_json().encode() + b"\n")
                    elif sessions is not None:  # a step of an agent run: turns only
                        sessions.add(turns_in(outcome.annotations))

            lines = iter_lines(src)
            done = 0

            async def write_oldest() -> None:
                nonlocal done
                size, future = pending.popleft()
                write(await future)
                done += size
                if on_progress:
                    on_progress(done, src.tell())

            limit = processes + 1 if pool is not None else 1
            # Every suite synchronous and no evaluation processes: a chunk is evaluated and written
            # without waiting on anything, with the cyclic collector paused. Its objects (events,
            # results, outcomes) live until the chunk is written and then go by reference counting;
            # left on, the collector walked them a few times per chunk (~6 % of the six-check
            # workload's CPU, docs/performance.md). Whatever cycles a chunk leaves are collected after it.
            quiet = pool is None and all(pipeline.runs_sync(suite) for suite in pipeline.suites.scoring)
            while chunk := list(islice(lines, concurrency)):
                paused = quiet and gc.isenabled()
                if paused:
                    gc.disable()
                try:
                    batch = [(raw, line_source(source_name, n)) for n, raw in chunk]
                    if quiet and decoder is None and not pending:
                        # evaluate_batch's own steps, without a task and a turn of the event loop
                        received_at = pipeline.clock()
                        found = pipeline.process_sync_batch(batch, received_at)
                        if any(outcome is None for outcome in found):  # not expected: every suite is sync
                            write(await finish_batch(pipeline, batch, found, received_at))
                        else:
                            write(cast("list[Outcome]", found))
                        done += len(chunk)
                        if on_progress:
                            on_progress(done, src.tell())
                        del batch, chunk, found
                        continue
                    if decoder is None:
                        step = evaluate_batch(pipeline, batch, pool)
                    else:
                        step = evaluate_items(
                            pipeline, [item for m in batch for item in decoder.decode(*m)], pool
                        )
                    pending.append((len(chunk), asyncio.ensure_future(step)))
                    if len(pending) >= limit:
                        await write_oldest()
                    del batch, chunk
                finally:
                    if paused:
                        gc.enable()
            while pending:
                await write_oldest()
        if sessions is not None:
            closed = await sessions.close_all(pipeline)
            for graded, _ in closed:
                summary.add(graded)  # the summary and its gates count sessions as model x session name
            if sessions_path is not None:
                with sessions_path.open("wb") as handle:
                    for _, session_result in closed:
                        handle.write(session_result.model_dump_json().encode() + b"\n")
    finally:
        for _, future in pending:  # only after an error: do not leave chunks running behind us
            future.cancel()
        if pool is not None:
            await pool.close()
        await pipeline.close()
    return summary
