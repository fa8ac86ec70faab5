"""Spans made by the real OpenTelemetry SDK, encoded as the Collector's kafka exporter writes them.

``otlp_proto``: ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans`` (the encoder of the OTLP
exporters), serialised. ``otlp_json``: the same message in OTLP/JSON — protobuf's JSON mapping
(lowerCamelCase names, 64-bit integers as strings) with the trace and span ids in hex, as the spec and the
Collector's JSON marshaler write them. Not a test module.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

__all__ = [
    "LONG_ARGUMENT",
    "PLANNED",
    "agent_trace",
    "export_json",
    "export_proto",
    "gen_ai_span",
    "http_span",
    "openinference_span",
    "openllmetry_span",
    "record",
    "span_event_span",
    "tool_calls_span",
]


@contextmanager
def record(
    service: str = "chat-api", **resource: Any
) -> Iterator[tuple[Tracer, Callable[[], Sequence[ReadableSpan]]]]:
    """A tracer of a fresh SDK provider, and a function returning the spans it finished so far."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, **resource}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider.get_tracer("streameval-tests"), exporter.get_finished_spans
    finally:
        provider.shutdown()


def export_proto(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def export_json(spans: Sequence[ReadableSpan]) -> bytes:
    document = MessageToDict(encode_spans(spans))
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document, ensure_ascii=False).encode()


def gen_ai_span(tracer: Tracer, *, prompt: str, answer: str, model: str = "gpt-4o", **extra: Any) -> None:
    """Current OTel GenAI conventions: messages as JSON attributes."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": f"{model}-2024-08-06",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                {"role": "user", "parts": [{"type": "text", "content": prompt}]},
            ],
            ensure_ascii=False,
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": answer}],
                    "finish_reason": "stop",
                },
            ],
            ensure_ascii=False,
        ),
        **extra,
    }
    with tracer.start_as_current_span(f"chat {model}", attributes=attributes):
        pass


def span_event_span(tracer: Tracer, *, prompt: str, answer: str, model: str = "gpt-4o-mini") -> None:
    """Older GenAI conventions: the text in span events gen_ai.user.message / gen_ai.choice."""
    with tracer.start_as_current_span(
        f"chat {model}",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": model,
            "gen_ai.usage.prompt_tokens": 5,
            "gen_ai.usage.completion_tokens": 3,
        },
    ) as span:
        span.add_event("gen_ai.user.message", {"content": prompt})
        span.add_event(
            "gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": json.dumps({"content": answer})}
        )


def openllmetry_span(tracer: Tracer, *, prompt: str, answer: str, model: str = "claude-3-5-sonnet") -> None:
    """OpenLLMetry (Traceloop): indexed gen_ai.prompt.N / gen_ai.completion.N attributes."""
    with tracer.start_as_current_span(
        "anthropic.chat",
        attributes={
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "You answer questions.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": prompt,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": answer,
            "gen_ai.completion.0.finish_reason": "end_turn",
            "llm.usage.total_tokens": 30,
            "app.eval.category": "qa_simple",
        },
    ):
        pass


def openinference_span(
    tracer: Tracer, *, prompt: str, answer: str, model: str = "llama-3.1-8b", messages: bool = True
) -> None:
    """OpenInference (Arize): llm.input_messages.N.message.* (or only input.value / output.value)."""
    attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
        "llm.system": "meta",
        "llm.token_count.prompt": 9,
        "llm.token_count.completion": 4,
        "llm.token_count.total": 13,
        "input.value": json.dumps({"messages": [{"role": "user", "content": prompt}]}, ensure_ascii=False),
        "output.value": answer,
    }
    if messages:
        attributes.update(
            {
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": prompt,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
            }
        )
    with tracer.start_as_current_span("ChatCompletion", attributes=attributes):
        pass


def tool_calls_span(
    tracer: Tracer,
    convention: str,
    *,
    prompt: str,
    calls: Sequence[tuple[str, dict[str, Any]]],
    model: str = "gpt-4o",
) -> None:
    """An LLM call that answers with tool calls only, no text (OpenAI's chat completions when the model
    calls tools: ``content`` null, finish reason ``tool_calls``), as each convention records it:
    ``gen_ai`` (``tool_call`` parts of ``gen_ai.output.messages``), ``span_events`` (the older
    ``gen_ai.choice`` event with OpenAI's ``tool_calls``), ``openllmetry``
    (``gen_ai.completion.0.tool_calls.M.*``), ``openinference``
    (``llm.output_messages.0.message.tool_calls.M.tool_call.function.*``, and the response as JSON in
    ``output.value``)."""
    ids = [f"call_{i}{name}" for i, (name, _) in enumerate(calls)]
    events: list[tuple[str, dict[str, Any]]] = []
    if convention == "gen_ai":
        parts = [
            {"type": "tool_call", "id": i, "name": name, "arguments": arguments}
            for i, (name, arguments) in zip(ids, calls, strict=True)
        ]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.response.model": f"{model}-2024-08-06",
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": prompt}]}], ensure_ascii=False
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": "tool_calls"}], ensure_ascii=False
            ),
        }
    elif convention == "span_events":
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": model,
        }
        message = {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
                for i, (name, arguments) in zip(ids, calls, strict=True)
            ],
        }
        events = [
            ("gen_ai.user.message", {"content": prompt}),
            ("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls", "message": json.dumps(message)}),
        ]
    elif convention == "openllmetry":
        attributes = {
            "llm.request.type": "chat",
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": model,
            "gen_ai.response.model": f"{model}-2024-08-06",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": prompt,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
        }
        for m, (i, (name, arguments)) in enumerate(zip(ids, calls, strict=True)):
            attributes[f"gen_ai.completion.0.tool_calls.{m}.id"] = i
            attributes[f"gen_ai.completion.0.tool_calls.{m}.name"] = name
            attributes[f"gen_ai.completion.0.tool_calls.{m}.arguments"] = json.dumps(
                arguments, ensure_ascii=False
            )
    else:
        assert convention == "openinference", convention
        response = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                            for i, (n, a) in zip(ids, calls, strict=True)
                        ],
                    },
                }
            ],
        }
        attributes = {
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
            "llm.provider": "openai",
            "input.value": json.dumps(
                {"messages": [{"role": "user", "content": prompt}]}, ensure_ascii=False
            ),
            "output.value": json.dumps(response),
            "output.mime_type": "application/json",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": prompt,
            "llm.output_messages.0.message.role": "assistant",
        }
        for m, (i, (name, arguments)) in enumerate(zip(ids, calls, strict=True)):
            prefix = f"llm.output_messages.0.message.tool_calls.{m}.tool_call"
            attributes[f"{prefix}.id"] = i
            attributes[f"{prefix}.function.name"] = name
            attributes[f"{prefix}.function.arguments"] = json.dumps(arguments, ensure_ascii=False)
    with tracer.start_as_current_span(f"chat {model}", attributes=attributes) as span:
        for name, body in events:
            span.add_event(name, body)


def http_span(tracer: Tracer, name: str = "GET /health") -> None:
    """Not an LLM span."""
    with tracer.start_as_current_span(
        name, attributes={"http.request.method": "GET", "http.response.status_code": 200}
    ):
        pass


#: longer than a session keeps of a tool call's arguments (streameval.features.sessions.turns.TOOL_TEXT)
LONG_ARGUMENT = "x" * 800


def _pause() -> None:
    time.sleep(0.003)  # spans end in distinct milliseconds (turns are ordered by event time in ms)


#: the tool calls the first LLM call of agent_trace(plan=...) asks for
PLANNED = (("get_weather", {"city": "Paris"}), ("book_hotel", {"city": "Paris"}))


def agent_trace(tracer: Tracer, *, model: str = "gpt-4o", plan: str | None = None) -> None:
    """An agent run: plan (LLM), a tool that answers, a tool that fails, the answer (LLM), under a root span.

    ``plan``: a convention of :func:`tool_calls_span`: the first LLM call answers with tool calls only
    (get_weather and book_hotel: :data:`PLANNED`), recorded as that convention does."""
    with tracer.start_as_current_span(
        "invoke_agent travel",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel",
        },
    ):
        if plan is None:
            gen_ai_span(
                tracer, prompt="明天巴黎天气如何?顺便订酒店。", answer="我先查天气,再订酒店。", model=model
            )
        else:
            tool_calls_span(tracer, plan, prompt="明天巴黎天气如何?顺便订酒店。", calls=PLANNED, model=model)
        _pause()
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "note": LONG_ARGUMENT}),
                "gen_ai.tool.call.result": "晴, 21°C",
            },
        ):
            pass
        _pause()
        with tracer.start_as_current_span(
            "execute_tool book_hotel",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "book_hotel",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            },
        ) as span:
            try:
                raise RuntimeError("no rooms left")
            except RuntimeError as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR))
        _pause()
        gen_ai_span(tracer, prompt="结果?", answer="明天巴黎晴, 21°C;酒店没有空房,预订失败。", model=model)
        _pause()
