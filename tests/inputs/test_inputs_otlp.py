"""OTLP trace exports as inputs: real SDK spans of the three GenAI conventions, both Collector encodings."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from _otel import (
    export_json,
    export_proto,
    gen_ai_span,
    http_span,
    openinference_span,
    openllmetry_span,
    record,
    span_event_span,
    tool_calls_span,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import REGISTRY

from streameval.batch import evaluate_items
from streameval.config import parse_config
from streameval.inputs import Inputs, OtlpDecoder, OtlpInput
from streameval.models import format_time
from streameval.pipeline import Pipeline, Source

ENCODERS: dict[str, Callable[[Sequence[ReadableSpan]], bytes]] = {
    "otlp_proto": export_proto,
    "otlp_json": export_json,
}
SOURCE = Source("otlp_spans", 1, 7)


def decoder(fmt: str, **options: Any) -> OtlpDecoder:
    return OtlpDecoder(OtlpInput(topic="otlp_spans", format=fmt, **options))  # type: ignore[arg-type]


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}-{span.context.span_id:016x}"


def mixed_export() -> tuple[list[ReadableSpan], dict[str, tuple[str, str, str]]]:
    """Every convention family, Chinese text, and non-LLM spans in one export; expected (model, input, output)."""
    with record(service="客服-api", **{"deployment.environment": "prod"}) as (tracer, finished):
        http_span(tracer)
        gen_ai_span(tracer, prompt="法国的首都是哪里？", answer="巴黎是法国的首都。")
        span_event_span(tracer, prompt="2+2?", answer="4")
        http_span(tracer, "SELECT users")
        openllmetry_span(tracer, prompt="Name a prime.", answer="7")
        openinference_span(tracer, prompt="Say hi", answer="Hi!")
        openinference_span(tracer, prompt="Say bye", answer="Bye!", messages=False)
        spans = list(finished())
    texts = [
        ("gpt-4o-2024-08-06", "法国的首都是哪里？", "巴黎是法国的首都。"),
        ("gpt-4o-mini", "2+2?", "4"),
        ("claude-3-5-sonnet", "Name a prime.", "7"),
        ("llama-3.1-8b", "Say hi", "Hi!"),
        ("llama-3.1-8b", json.dumps({"messages": [{"role": "user", "content": "Say bye"}]}), "Bye!"),
    ]
    llm = [s for s in spans if not s.name.startswith(("GET", "SELECT"))]
    return spans, {span_id(s): t for s, t in zip(llm, texts, strict=True)}


def skipped(topic: str) -> float:
    return (
        REGISTRY.get_sample_value("streameval_input_spans_total", {"topic": topic, "kind": "skipped"}) or 0.0
    )


@pytest.mark.parametrize("fmt", ENCODERS)
def test_one_request_event_per_llm_span(fmt: str) -> None:
    spans, expected = mixed_export()
    before = skipped("otlp_spans")
    items = decoder(
        fmt, category_attribute="app.eval.category", tag_attributes=["deployment.environment"]
    ).decode(ENCODERS[fmt](spans), SOURCE)
    assert skipped("otlp_spans") - before == 2  # the HTTP and SQL spans: counted, never dead-lettered
    assert [i.error for i in items] == [None] * 5
    events = [orjson.loads(i.raw) for i in items]
    assert [e["id"] for e in events] == list(expected)
    assert [i.source.item for i in items] == list(expected)  # each span has its own dead-letter/offset key
    by_id = {s.context.trace_id: s for s in spans if s.context}
    for event in events:
        model, prompt, answer = expected[event["id"]]
        assert (event["model"], event["input"], event["output"]) == (model, prompt, answer)
        span = by_id[int(event["id"].split("-")[0], 16)]
        assert event["timestamp"] == format_time(span.end_time / 1e9)  # type: ignore[operator]
        assert event["metadata"]["service.name"] == "客服-api"
        assert event["metadata"]["trace_id"] + "-" + event["metadata"]["span_id"] == event["id"]
        assert event["tags"] == ["prod"]  # a resource attribute
    gen_ai, events_span, openllmetry, openinference, _ = events
    assert gen_ai["metadata"] | {"trace_id": None, "span_id": None} == {
        "trace_id": None,
        "span_id": None,
        "span_name": "chat gpt-4o",
        "convention": "gen_ai",
        "service.name": "客服-api",
        "provider": "openai",
        "operation": "chat",
        "input_tokens": 12,
        "output_tokens": 7,
        "finish_reasons": ["stop"],
    }
    assert events_span["metadata"]["input_tokens"] == 5 and events_span["metadata"]["finish_reasons"] == [
        "stop"
    ]
    assert openllmetry["category"] == "qa_simple" and openllmetry["metadata"]["provider"] == "Anthropic"
    assert openllmetry["metadata"]["finish_reasons"] == ["end_turn"]
    assert (
        openinference["metadata"]["total_tokens"] == 13
        and openinference["metadata"]["convention"] == "openinference"
    )
    assert "category" not in gen_ai


def test_both_encodings_give_the_same_events() -> None:
    spans, _ = mixed_export()
    proto = [i.raw for i in decoder("otlp_proto").decode(export_proto(spans), SOURCE)]
    assert proto == [i.raw for i in decoder("otlp_json").decode(export_json(spans), SOURCE)]
    assert proto == [
        i.raw for i in decoder("otlp_proto").decode(export_proto(spans), SOURCE)
    ]  # stable on redelivery


@pytest.mark.parametrize(
    ("attributes", "found"),
    [
        (
            {
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"new"}]}]',
                "gen_ai.completion.0.content": "old",
                "output.value": "raw",
            },
            "new",
        ),
        (
            {"gen_ai.completion.0.content": "openllmetry", "llm.output_messages.0.message.content": "oi"},
            "openllmetry",
        ),
        ({"llm.output_messages.0.message.content": "messages", "output.value": "value"}, "messages"),
        ({"output.value": "value"}, "value"),
        # tool-call-only output messages have no text: the next place with text is used
        (
            {
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","name":"f"}]}]',
                "gen_ai.completion.0.content": "text",
            },
            "text",
        ),
        # several text parts of one message are joined; several choices: the first
        (
            {
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"a"},'
                '{"type":"text","content":"b"}]},{"role":"assistant","parts":[{"type":"text","content":"c"}]}]'
            },
            "a\nb",
        ),
    ],
)
def test_output_text_precedence(attributes: dict[str, Any], found: str) -> None:
    with record() as (tracer, finished):
        with tracer.start_as_current_span(
            "llm", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", **attributes}
        ):
            pass
        [item] = decoder("otlp_proto").decode(export_proto(finished()), SOURCE)
    assert orjson.loads(item.raw)["output"] == found


def test_input_is_the_last_user_message() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "first question"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "answer"}]},
        {"role": "user", "parts": [{"type": "text", "content": "follow-up"}]},
    ]
    with record() as (tracer, finished):
        gen_ai_span(tracer, prompt="", answer="ok", **{"gen_ai.input.messages": json.dumps(messages)})
        [item] = decoder("otlp_json").decode(export_json(finished()), SOURCE)
    assert orjson.loads(item.raw)["input"] == "follow-up"


def test_an_unmarked_span_with_a_gen_ai_model_and_output_is_an_llm_span() -> None:
    """Instrumentations older than gen_ai.operation.name: a model and text, no marker."""
    with record() as (tracer, finished):
        gen_ai_span(tracer, prompt="q", answer="a", **{"gen_ai.operation.name": ""})
        with tracer.start_as_current_span(
            "embeddings", attributes={"gen_ai.system": "openai", "gen_ai.request.model": "e"}
        ):
            pass
        items = decoder("otlp_proto").decode(export_proto(finished()), SOURCE)
    [event] = [orjson.loads(i.raw) for i in items]
    assert (event["output"], event["metadata"]["convention"]) == ("a", "gen_ai")


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"},
        {"llm.request.type": "embedding"},
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.request.model": "m",
            "output.value": "agent output",
        },
        {"openinference.span.kind": "RETRIEVER"},
        {"openinference.span.kind": "CHAIN", "output.value": "x"},
        {},
    ],
)
def test_other_spans_are_skipped(attributes: dict[str, Any]) -> None:
    with record() as (tracer, finished):
        with tracer.start_as_current_span("step", attributes=attributes):
            pass
        assert decoder("otlp_proto").decode(export_proto(finished()), SOURCE) == []


@pytest.mark.parametrize("fmt", ENCODERS)
def test_llm_span_without_output_is_a_schema_dead_letter(fmt: str) -> None:
    with record() as (tracer, finished):
        with tracer.start_as_current_span(
            "chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
        ):
            pass  # content capture off: no messages recorded
        with tracer.start_as_current_span(
            "chat",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"x"}]}]',
            },
        ):
            pass  # no model
        openllmetry_span(tracer, prompt="q", answer="a")
        spans = finished()
        items = decoder(fmt).decode(ENCODERS[fmt](spans), SOURCE)
    assert [i.error is None for i in items] == [False, False, True]
    no_output, no_model, _ = items
    assert no_output.error is not None and no_output.error.kind == "schema"
    assert no_output.error.event_id == span_id(spans[0])
    assert (
        f"{spans[0].context.span_id:016x}" in no_output.error.reason
        and "no output text" in no_output.error.reason
    )  # type: ignore[union-attr]
    assert no_model.error is not None and "model" in no_model.error.reason
    assert orjson.loads(no_output.raw)["spanId"] == f"{spans[0].context.span_id:016x}"  # type: ignore[union-attr]


@pytest.mark.parametrize("convention", ["gen_ai", "span_events", "openllmetry", "openinference"])
@pytest.mark.parametrize("fmt", ENCODERS)
def test_an_answer_of_tool_calls_only_is_a_dead_letter_naming_the_tools(fmt: str, convention: str) -> None:
    """What OpenAI's chat completions answer when the model calls tools (no text): nothing to evaluate;
    the reason names the tools, not content capture. OpenInference's output.value (the response as JSON,
    ``"content": null``) is not taken for the answer."""
    calls = [(f"tool_{i}", {"n": i}) for i in range(7)]
    with record() as (tracer, finished):
        tool_calls_span(tracer, convention, prompt="天气?", calls=calls[:2])
        tool_calls_span(tracer, convention, prompt="all", calls=calls)
        spans = finished()
        items = decoder(fmt).decode(ENCODERS[fmt](spans), SOURCE)
    assert [i.error is not None for i in items] == [True, True]
    two, seven = (i.error for i in items)
    assert two is not None and two.kind == "schema" and two.event_id == span_id(spans[0])  # type: ignore[attr-defined]
    assert str(two).endswith("answered with tool calls only (tool_0, tool_1): no text to evaluate")
    assert "content capture" not in str(two)
    assert "(tool_0, tool_1, tool_2, tool_3, tool_4, ...): no text" in str(seven)
    # with an assemble: spans session the same spans are plan steps of their runs
    spec = OtlpInput(topic="otlp_spans", format=fmt)  # type: ignore[arg-type]
    planned = OtlpDecoder(spec, steps=True).decode(ENCODERS[fmt](spans), SOURCE)
    docs = [orjson.loads(i.raw) for i in planned]
    assert all(i.error is None and i.step for i in planned)
    # root spans: each is also its run's end (the end step's id ends in :end)
    assert [(d["kind"], d["id"]) for d in docs] == [
        ("plan", span_id(spans[0])),
        ("root", span_id(spans[0]) + ":end"),
        ("plan", span_id(spans[1])),
        ("root", span_id(spans[1]) + ":end"),
    ]
    assert [c["name"] for c in docs[2]["calls"]] == [n for n, _ in calls]
    assert docs[0]["calls"][1]["arguments"] in ('{"n":1}', '{"n": 1}')


def test_an_answer_with_text_and_tool_calls_is_an_event_as_before() -> None:
    with record() as (tracer, finished):
        gen_ai_span(
            tracer,
            prompt="天气?",
            answer="x",
            **{
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "text", "content": "Let me look."},
                                {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}},
                            ],
                        }
                    ]
                )
            },
        )
        spec = OtlpInput(topic="otlp_spans", format="otlp_json")  # type: ignore[call-arg]
        item, end = OtlpDecoder(spec, steps=True).decode(export_json(finished()), SOURCE)
    assert item.error is None and not item.step and orjson.loads(item.raw)["output"] == "Let me look."
    assert end.step and orjson.loads(end.raw)["kind"] == "root"


@pytest.mark.parametrize(
    ("fmt", "raw", "kind", "words"),
    [
        ("otlp_proto", b"\xff\xff\xff\xff", "schema", "not an OTLP ExportTraceServiceRequest"),
        ("otlp_proto", b'{"id": "native event sent to the wrong topic"}', "schema", "OTLP"),
        ("otlp_json", b"{not json", "invalid_json", "not strict JSON"),
        ("otlp_json", b'{"resourceSpans": 5}', "schema", "resourceSpans"),
        (
            "otlp_json",
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": 1}]}]}]}]}',
            "schema",
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].key",
        ),
        ("otlp_json", b'{"id": "e", "model": "m", "output": "a native event"}', "schema", "no resourceSpans"),
        ("otlp_json", b'{"resourceSpans": [], "resourceSpans": []}', "invalid_json", "duplicate key"),
    ],
)
def test_an_undecodable_export_is_one_dead_letter_with_its_bytes(
    fmt: str, raw: bytes, kind: str, words: str
) -> None:
    [item] = decoder(fmt).decode(raw, SOURCE)
    assert item.error is not None and item.error.kind == kind and words in item.error.reason
    assert item.raw == raw and item.source == SOURCE


def test_too_large_export() -> None:
    [item] = decoder("otlp_proto", max_message_bytes=10).decode(b"\x0a" * 11, SOURCE)
    assert item.error is not None and item.error.kind == "too_large"


def test_structured_message_attributes() -> None:
    """gen_ai.input/output.messages may be recorded structured (arrays of key-value lists), not as JSON text."""

    def kv(key: str, value: AnyValue) -> KeyValue:
        return KeyValue(key=key, value=value)

    def text(s: str) -> AnyValue:
        return AnyValue(string_value=s)

    def message(role: str, content: str) -> AnyValue:
        part = AnyValue(kvlist_value={"values": [kv("type", text("text")), kv("content", text(content))]})
        return AnyValue(
            kvlist_value={
                "values": [kv("role", text(role)), kv("parts", AnyValue(array_value={"values": [part]}))]
            }
        )

    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=bytes(range(1, 17)),
            span_id=bytes(range(1, 9)),
            name="chat",
            end_time_unix_nano=1_780_000_000_000_000_000,
        )
    )
    span.attributes.extend(
        [
            kv("gen_ai.operation.name", text("generate_content")),
            kv("gen_ai.request.model", text("gemini-2.0")),
            kv("gen_ai.input.messages", AnyValue(array_value={"values": [message("user", "你好")]})),
            kv("gen_ai.output.messages", AnyValue(array_value={"values": [message("model", "您好！")]})),
        ]
    )
    [item] = decoder("otlp_proto").decode(request.SerializeToString(), SOURCE)
    event = orjson.loads(item.raw)
    assert event["id"] == "0102030405060708090a0b0c0d0e0f10-0102030405060708"
    assert (event["input"], event["output"], event["model"]) == ("你好", "您好！", "gemini-2.0")
    assert event["timestamp"] == format_time(1_780_000_000)


def test_otlp_json_with_protobuf_field_names_and_int_timestamps() -> None:
    document = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": "AB" * 16,
                                "span_id": "CD" * 8,
                                "name": "x",
                                "end_time_unix_nano": 1_780_000_000_000_000_000,
                                "attributes": [
                                    {"key": "openinference.span.kind", "value": {"string_value": "LLM"}},
                                    {"key": "llm.model_name", "value": {"string_value": "m"}},
                                    {"key": "output.value", "value": {"string_value": "out"}},
                                    {"key": "llm.token_count.total", "value": {"int_value": "12"}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    [item] = decoder("otlp_json").decode(orjson.dumps(document), SOURCE)
    event = orjson.loads(item.raw)
    assert event["id"] == "ab" * 16 + "-" + "cd" * 8 and event["metadata"]["total_tokens"] == 12


SUITES = {
    "suites": [
        {
            "name": "qa",
            "default": True,
            "evaluators": [{"evaluator": "contains", "params": {"value": "巴黎"}}],
        }
    ]
}


async def test_spans_and_native_events_share_the_pipeline() -> None:
    """A batch from two topics: each message decoded by its topic's format, then one pipeline for all."""
    spans, expected = mixed_export()
    config = {
        **SUITES,
        "inputs": [
            {"topic": "evals.requests", "format": "native"},
            {"topic": "otlp_spans", "format": "otlp_proto"},
        ],
    }
    _, suites = parse_config(config)
    inputs = Inputs(suites.inputs)
    native = orjson.dumps({"id": "n-1", "model": "m", "output": "巴黎"})
    batch = [
        (native, Source("evals.requests", 0, 0)),
        (export_proto(spans), Source("otlp_spans", 0, 0)),
        (b"\x00garbage", Source("otlp_spans", 0, 1)),
    ]
    items = inputs.expand(batch)
    outcomes = await evaluate_items(Pipeline(suites), items)
    assert [o.result.id if o.result else o.dead_letter.kind for o in outcomes] == ["n-1", *expected, "schema"]  # type: ignore[union-attr]
    assert [o.result.score for o in outcomes if o.result] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    letter = outcomes[-1].dead_letter
    assert letter is not None and base64.b64decode(letter.raw) == b"\x00garbage"
    assert letter.source.topic == "otlp_spans" and letter.source.offset == 1


async def test_an_export_processed_twice_counts_every_span_once(aredis: Any, prefix: str) -> None:
    """The worker's batch step on real Redis: the same export (with a span that has no output) twice."""
    from streameval.processor import Processor
    from streameval.store import ResultStore

    spans, expected = mixed_export()
    with record() as (tracer, finished):
        with tracer.start_as_current_span(
            "chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
        ):
            pass
        no_output = export_proto(finished())
    _, suites = parse_config({**SUITES, "inputs": [{"topic": "otlp_spans", "format": "otlp_proto"}]})
    store = ResultStore(aredis, prefix=prefix)
    processor = Processor(Pipeline(suites), store, inputs=Inputs(suites.inputs))
    batch = [(export_proto(spans), Source("otlp_spans", 0, 0)), (no_output, Source("otlp_spans", 0, 1))]
    first = await processor.process_batch(batch)
    again = await processor.process_batch(batch)  # a redelivery: same offsets
    assert [(p.kind, p.key) for p in first] == [(p.kind, p.key) for p in again]
    assert [p.key.decode() for p in first if p.kind == "result"] == list(expected)  # type: ignore[union-attr]
    assert [p.value for p in first if p.kind == "result"] == [p.value for p in again if p.kind == "result"]
    assert sum(a.count for a in await store.all_time()) == 5
    assert await store.dead_letter_counts() == {"schema": 1}


async def test_evaluation_processes_decode_exports_with_the_same_outcomes() -> None:
    """With STREAMEVAL_EVAL_PROCESSES the processes decode too; outcomes and span counts are the same."""
    import yaml

    from streameval.batch import evaluate_messages
    from streameval.config import parse_config_text
    from streameval.evalpool import EvalPool

    spans, expected = mixed_export()
    config = {
        **SUITES,
        "inputs": [
            {"topic": "spans.pool", "format": "otlp_proto"},
            {"topic": "native.pool", "format": "native"},
        ],
    }
    text = yaml.safe_dump(config, allow_unicode=True)
    _, suites = parse_config_text(text)
    inputs, pipeline = Inputs(suites.inputs), Pipeline(suites)
    batch = [
        (export_proto(spans), Source("spans.pool", 0, 0)),
        (b"\x00bad", Source("spans.pool", 0, 1)),
        (orjson.dumps({"id": "n", "model": "m", "output": "巴黎"}), Source("native.pool", 0, 0)),
    ]
    here_sources, here = await evaluate_messages(pipeline, inputs, batch)
    pool = EvalPool(text, "<test>", 1, max_event_bytes=1 << 20, max_event_depth=64)
    await pool.start()
    try:
        before = skipped("spans.pool")
        sources, there = await evaluate_messages(pipeline, inputs, batch, pool)
        found = await pool.expand_evaluate(batch, 0.0)
    finally:
        await pool.close()
    assert skipped("spans.pool") - before == 4  # counted in the processes, observed here (twice: two calls)
    assert found is not None and all(outcome is not None for _, _, outcome in found)
    assert sources == here_sources and [s.item for s in sources] == [*expected, None, None]

    def comparable(o: Any) -> Any:
        return (o.result.id, o.result.score) if o.result else (o.dead_letter.kind, o.dead_letter.reason)

    assert [comparable(o) for o in there] == [comparable(o) for o in here]
