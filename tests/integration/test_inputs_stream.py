"""Several input topics into one worker, on the real broker (Tansu) and Redis: native events, OTLP
exports in both Collector encodings and mapped JSON, with exact accounting.

Every message ends in results or dead letters, each LLM span once; an export delivered twice (on the
topic twice, and every topic replayed by a new consumer group) publishes its spans' results again only
while the broker has not acknowledged them (the stored results), and counts nothing again; non-LLM spans
are skipped.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import collect, ensure_topics, produce
from streameval.store import hash_fields

from ._topics import read_all
from .test_stream import by_topic, snapshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _otel import (
    export_json,
    export_proto,
    gen_ai_span,
    http_span,
    openinference_span,
    openllmetry_span,
    record,
    span_event_span,
)

pytestmark = pytest.mark.integration

SUITES = """\
inputs:
  - {{topic: {native}, format: native}}
  - {{topic: {proto}, format: otlp_proto, category_attribute: app.eval.category}}
  - {{topic: {json}, format: otlp_json}}
  - topic: {app}
    format: json
    map:
      id: $.request_id
      model: $.model
      output: $.choices[0].text   # in a flow mapping ({{...}}) quote a path with brackets
      input: $.prompt
suites:
  - name: answers
    default: true
    evaluators:
      - {{evaluator: regex, params: {{pattern: '\\S'}}}}
      - {{evaluator: contains, params: {{value: '答'}}}}
"""


def llm_export(n: int) -> tuple[bytes, bytes, list[str]]:
    """One export (both encodings) with five LLM spans of every convention and two other spans."""
    with record(service="客服") as (tracer, finished):
        http_span(tracer)
        gen_ai_span(tracer, prompt=f"问题 {n}", answer=f"回答 {n}")
        span_event_span(tracer, prompt=f"q{n}", answer=f"a{n}")
        openllmetry_span(tracer, prompt=f"q{n}", answer=f"答案 {n}")
        http_span(tracer, "SELECT 1")
        openinference_span(tracer, prompt=f"q{n}", answer=f"a{n}")
        openinference_span(tracer, prompt=f"q{n}", answer=f"a{n}", messages=False)
        spans = list(finished())
    ids = [
        f"{s.context.trace_id:032x}-{s.context.span_id:016x}"
        for s in spans
        if not s.name.startswith(("GET", "SELECT"))
    ]  # type: ignore[union-attr]
    return export_proto(spans), export_json(spans), ids


def without_output() -> tuple[bytes, str]:
    """An export with one LLM span whose content was not captured, and one good span."""
    with record() as (tracer, finished):
        with tracer.start_as_current_span(
            "chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
        ):
            pass
        gen_ai_span(tracer, prompt="p", answer="答")
        spans = list(finished())
    return export_proto(spans), f"{spans[1].context.trace_id:032x}-{spans[1].context.span_id:016x}"  # type: ignore[union-attr]


@pytest.mark.parametrize("processes", ["0", "1"])  # 1: the evaluation process decodes the exports
async def test_four_input_topics_into_one_worker(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
    processes: str,
) -> None:
    names = {
        "native": topics["requests"],
        "proto": topics["requests"] + ".otlp",
        "json": topics["requests"] + ".otlpjson",
        "app": topics["requests"] + ".app",
    }
    config = tmp_path / "suites.yaml"
    config.write_text(SUITES.format(**names), encoding="utf-8")
    await ensure_topics(broker.bootstrap, [*topics.values(), *names.values()], partitions=2)

    native = [orjson.dumps({"id": f"n-{i}", "model": "m", "output": f"答 {i}"}) for i in range(40)]
    native += [b"not json", b'{"id": "n-bad", "model": "m"}']  # invalid_json, schema
    exports = [llm_export(n) for n in range(15)]
    proto = [p for p, _, _ in exports[:10]]
    partial, partial_good = without_output()
    proto += [
        partial,
        b"\x00\x01garbage",
        proto[0],
    ]  # a span without output, an undecodable export, a redelivery
    otlp_json = [j for _, j, _ in exports[10:]]
    app = [
        orjson.dumps(
            {"request_id": f"r-{i}", "model": "qwen", "prompt": "p", "choices": [{"text": f"答{i}"}]}
        )
        for i in range(20)
    ]
    app += [
        orjson.dumps({"request_id": "r-bad", "model": "qwen", "choices": []})
    ]  # the output path finds nothing

    for topic, values in (("native", native), ("proto", proto), ("json", otlp_json), ("app", app)):
        await produce(broker.bootstrap, names[topic], values)
    span_ids = {i for _, _, ids in exports for i in ids}
    unique = {f"n-{i}" for i in range(40)} | span_ids | {partial_good} | {f"r-{i}" for i in range(20)}
    assert len(unique) == 40 + 75 + 1 + 20
    # the redelivered export re-publishes its five spans' results, unless the broker acknowledged the first
    # copy's batch before it was recorded (published marks): then nothing
    published_results = len(unique) + 5
    published_dead = 2 + 1 + 1 + 1

    out_topics = [topics["results"], topics["deadletter"]]
    worker = start_worker(config, app_id="group-a", STREAMEVAL_EVAL_PROCESSES=processes)
    await collect(
        broker.bootstrap,
        out_topics,
        until=lambda r: (
            (
                len({x.key for x in r if x.topic == topics["results"]}) >= len(unique)
                and sum(x.topic == topics["deadletter"] for x in r) >= published_dead
            )
            or worker.proc.poll() is not None
        ),
        timeout=180,
    )
    assert worker.proc.poll() is None, "the worker exited"
    assert worker.stop() == 0
    records = await read_all(broker.bootstrap, out_topics)
    results, dead = by_topic(records, topics["results"]), by_topic(records, topics["deadletter"])
    assert len(results) in (len(unique), published_results) and len(dead) == published_dead  # nothing extra

    copies: dict[bytes, set[bytes]] = {}
    for r in results:
        copies.setdefault(r.key or b"", set()).add(r.value)
    assert {k.decode() for k in copies} == unique
    assert all(len(v) == 1 for v in copies.values()), "a redelivered span's result differs from the first"
    by_id = {orjson.loads(next(iter(v)))["id"]: orjson.loads(next(iter(v))) for v in copies.values()}
    openllmetry = [
        by_id[ids[2]] for _, _, ids in exports
    ]  # its answer has 答; category only where configured
    assert [r["category"] for r in openllmetry] == ["qa_simple"] * 10 + [None] * 5
    assert all(r["score"] == 1.0 for r in openllmetry)

    letters = [orjson.loads(d.value) for d in dead]
    assert Counter(d["kind"] for d in letters) == {"schema": 4, "invalid_json": 1}
    reasons = " | ".join(d["reason"] for d in letters)
    assert (
        "no output text" in reasons
        and "not an OTLP" in reasons
        and "map.output: $.choices[0].text found nothing" in reasons
    )
    assert {d["source"]["topic"] for d in letters} == {names["native"], names["proto"], names["app"]}

    state = await snapshot(aredis, prefix)
    all_time = {k: v for k, v in state.items() if k.endswith(":all") and k != f"{prefix}{{dl}}:all"}
    assert sum(int(hash_fields(v)["count"]) for v in all_time.values()) == len(
        unique
    )  # each span counted once
    assert sum(int(v) for v in state[f"{prefix}{{dl}}:all"].values()) == published_dead

    # Every topic again from the start (a new consumer group): the broker has every result (published marks),
    # so only the dead letters are published again; nothing counted twice.
    replay = start_worker(config, app_id="group-b", STREAMEVAL_EVAL_PROCESSES=processes)
    await collect(
        broker.bootstrap,
        out_topics,
        until=lambda r: len(r) >= len(records) + published_dead or replay.proc.poll() is not None,
        timeout=180,
    )
    assert replay.proc.poll() is None, "the worker exited"
    assert replay.stop() == 0
    again = await read_all(broker.bootstrap, out_topics)
    assert len(again) == len(records) + published_dead
    assert {r.value for r in by_topic(again, topics["results"])} == {r.value for r in results}
    assert await snapshot(aredis, prefix) == state
