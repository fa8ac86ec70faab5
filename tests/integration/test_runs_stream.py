"""Agent runs (``assemble: spans``) through a worker on the real broker (Tansu) and Redis: one trace made by
the real OpenTelemetry SDK, its spans split over two exports on two partitions (as a batching span
processor sends them), becomes one run that closes on its root span's end, long before its gap; a
trace with no LLM span closes without a result."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker
from streameval.features.sessions.state import SessionKeys
from streameval.kafka_io import collect, ensure_topics, produce
from streameval.models import SessionResult

from ._topics import read_all

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _otel import agent_trace, export_proto, record

pytestmark = pytest.mark.integration

GAP = 120.0  # far longer than the test waits: only the root span's end can close the run in time


async def test_a_trace_split_over_two_exports_is_one_run_closed_on_its_root_span(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(
        f"""
windowing: {{close_interval_s: 0.2}}
inputs: [{{topic: {topics["requests"]}, format: otlp_proto}}]
suites: [{{name: llm, default: true, evaluators: [{{evaluator: contains, params: {{value: 巴黎}}}}]}}]
sessions:
  - name: runs
    key: metadata.trace_id
    assemble: spans
    gap_s: {GAP}
    category: agent
    evaluators: [{{evaluator: turn_scores}}, {{evaluator: thread_clean, weight: 0}}]
""",
        encoding="utf-8",
    )
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    worker = start_worker(config, app_id="runs")
    with record() as (tracer, finished):
        agent_trace(tracer)
        spans = list(finished())
    trace_id = f"{spans[0].context.trace_id:032x}"
    ids = [f"{trace_id}-{s.context.span_id:016x}" for s in spans]  # type: ignore[union-attr]
    # the first LLM call and both tools in one export, the answer and the root span in the next
    exports = [export_proto(spans[:3]), export_proto(spans[3:])]
    with record() as (tracer, finished):  # a trace with no LLM span: nothing to judge, no run result
        with tracer.start_as_current_span("GET /health"):
            with tracer.start_as_current_span(
                "execute_tool ping",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ping"},
            ):
                pass
        quiet = list(finished())
        exports.append(export_proto(quiet))
    partitions = iter([b"export-0", b"export-1", b"export-0"])  # murmur2: partitions 0, 1, 0 of two
    await produce(broker.bootstrap, topics["requests"], exports, key=lambda _: next(partitions))
    start = time.monotonic()
    records = await collect(broker.bootstrap, [topics["sessions"]], until=lambda r: len(r) >= 1, timeout=90)
    waited = time.monotonic() - start
    assert worker.proc.poll() is None, worker.log()[-3000:]
    assert {r.partition for r in await read_all(broker.bootstrap, [topics["requests"]])} == {0, 1}
    records = await read_all(broker.bootstrap, [topics["sessions"]], idle=8.0)  # the quiet trace closes too
    [run] = [SessionResult.model_validate_json(r.value) for r in records]
    assert waited < GAP and run.closed_by == "end" and run.key == trace_id and run.revision == 0
    assert run.turn_ids == ids  # time order: plan, weather, hotel (failed), answer, the root's end
    assert (run.metrics.tool_calls, run.metrics.tool_errors, run.metrics.steps, run.metrics.turns) == (
        2,
        1,
        3,
        5,
    )
    assert run.score == 0.5 and run.models == ["gpt-4o-2024-08-06"]
    # the steps are never evaluated events: the two LLM spans are the only results
    results = await read_all(broker.bootstrap, [topics["results"]])
    assert sorted(orjson.loads(r.value)["id"] for r in results) == sorted([ids[0], ids[3]])
    assert not await read_all(broker.bootstrap, [topics["deadletter"]])
    # the quiet trace's run was closed (its root span's end), without a result
    keys = SessionKeys(prefix)  # the worker's shard count: the default
    meta = keys.keys(keys.tag("runs", f"{quiet[0].context.trace_id:032x}"))[1]  # type: ignore[union-attr]
    assert (await aredis.hget(meta, "state")) in (b"closed", "closed")
