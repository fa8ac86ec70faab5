"""The request event's ``usage`` block: the contract, OTLP GenAI spans from the real SDK, the JSON field map,
and bad values dead-lettered by their field (docs/usage.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from _otel import export_json, export_proto, gen_ai_span, openinference_span, record
from opentelemetry.sdk.trace import ReadableSpan

from streameval.errors import EventError
from streameval.event_decoder import EventDecoder
from streameval.inputs import JsonDecoder, JsonInput, OtlpDecoder, OtlpInput
from streameval.pipeline import Source

ENCODERS: dict[str, Callable[[Sequence[ReadableSpan]], bytes]] = {
    "otlp_proto": export_proto,
    "otlp_json": export_json,
}
SOURCE = Source("t", 0, 1)
DECODER = EventDecoder()


def otlp_events(fmt: str, spans: Sequence[ReadableSpan]) -> list[Any]:
    decoder = OtlpDecoder(OtlpInput(topic="t", format=fmt))  # type: ignore[arg-type]
    out = []
    for item in decoder.decode(ENCODERS[fmt](spans), SOURCE):
        if item.error is not None:  # dead-lettered by the decoder (the raw span kept)
            out.append(item.error)
            continue
        try:
            out.append(DECODER.decode(item.raw))
        except EventError as exc:
            out.append(exc)
    return out


@pytest.mark.parametrize("fmt", ENCODERS)
def test_gen_ai_span_fills_usage(fmt: str) -> None:
    with record() as (tracer, finished):
        gen_ai_span(
            tracer,
            prompt="q",
            answer="a",
            **{
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 300,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.reasoning.output_tokens": 120,
                "gen_ai.response.finish_reasons": ["length"],
            },
        )
        spans = list(finished())
    (event,) = otlp_events(fmt, spans)
    usage = event.usage
    assert (usage.input_tokens, usage.output_tokens) == (1200, 300)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (1000, 120)
    assert usage.finish_reason == "length"
    span = spans[0]
    assert span.end_time is not None and span.start_time is not None
    assert usage.duration_ms == pytest.approx((span.end_time - span.start_time) / 1e6)
    assert usage.cost is None and usage.time_to_first_token_ms is None


@pytest.mark.parametrize("fmt", ENCODERS)
def test_deprecated_and_openinference_names(fmt: str) -> None:
    with record() as (tracer, finished):
        gen_ai_span(
            tracer,
            prompt="q",
            answer="a",
            **{"gen_ai.usage.cache_read_input_tokens": 4, "gen_ai.usage.input_tokens": 9},
        )
        openinference_span(tracer, prompt="q", answer="a")
        spans = list(finished())
    first, second = otlp_events(fmt, spans)
    assert (first.usage.input_tokens, first.usage.cached_input_tokens) == (9, 4)
    assert second.usage is not None and second.usage.input_tokens is not None


@pytest.mark.parametrize("fmt", ENCODERS)
@pytest.mark.parametrize(
    ("attribute", "value", "field"),
    [
        ("gen_ai.usage.input_tokens", -5, "usage.input_tokens"),
        ("gen_ai.usage.output_tokens", 10**12, "usage.output_tokens"),
        ("gen_ai.usage.output_tokens", math.nan, "usage.output_tokens"),
        ("gen_ai.usage.input_tokens", "many", "usage.input_tokens"),
        ("gen_ai.usage.cache_read.input_tokens", 500, "usage"),  # more cached than input (12)
    ],
)
def test_bad_counts_are_dead_letters_naming_the_field(
    fmt: str, attribute: str, value: Any, field: str
) -> None:
    with record() as (tracer, finished):
        gen_ai_span(tracer, prompt="q", answer="a", **{attribute: value})
        spans = list(finished())
    (found,) = otlp_events(fmt, spans)
    assert isinstance(found, EventError)
    assert field in str(found)


def native(usage: dict[str, Any]) -> bytes:
    return orjson.dumps({"id": "e", "model": "m", "output": "o", "usage": usage})


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"input_tokens": -1}, "usage.input_tokens"),
        ({"output_tokens": 100_000_001}, "usage.output_tokens"),
        ({"cost": -0.5}, "usage.cost"),
        ({"cost": 2_000_000}, "usage.cost"),
        ({"duration_ms": -3}, "usage.duration_ms"),
        ({"currency": "usd"}, "usage.currency"),
        ({"input_tokens": 10, "cached_input_tokens": 11}, "cached_input_tokens (11) exceeds input_tokens"),
        ({"output_tokens": 5, "reasoning_tokens": 6}, "reasoning_tokens (6) exceeds output_tokens"),
        ({"duration_ms": 5, "time_to_first_token_ms": 6}, "time_to_first_token_ms"),
        ({"tokens": 5}, "usage"),
    ],
)
def test_native_bad_usage_names_the_field(usage: dict[str, Any], field: str) -> None:
    with pytest.raises(EventError) as caught:
        DECODER.decode(native(usage))
    assert field in str(caught.value)


def test_native_nan_cost_is_rejected() -> None:
    with pytest.raises(EventError) as caught:
        DECODER.decode(b'{"id": "e", "model": "m", "output": "o", "usage": {"cost": NaN}}')
    assert "field 'cost' is NaN" in str(caught.value)


def test_native_usage_round_trips() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cached_input_tokens": 4,
        "reasoning_tokens": 2,
        "duration_ms": 812.5,
        "time_to_first_token_ms": 120.0,
        "cost": 0.0031,
        "currency": "EUR",
        "finish_reason": "stop",
    }
    event = DECODER.decode(native(usage))
    assert event.usage is not None and event.usage.model_dump() == usage


def test_json_map_fills_usage_field_by_field() -> None:
    spec = JsonInput(
        topic="t",
        format="json",
        map={
            "id": "$.id",
            "model": "$.model",
            "output": "$.choices[0].message.content",
            "usage.input_tokens": "$.usage.prompt_tokens",
            "usage.output_tokens": "$.usage.completion_tokens",
            "usage.cached_input_tokens": "$.usage.prompt_tokens_details.cached_tokens",
            "usage.reasoning_tokens": "$.usage.completion_tokens_details.reasoning_tokens",
            "usage.finish_reason": "$.choices[0].finish_reason",
        },
        optional=["usage.reasoning_tokens"],
        set={"usage.currency": "USD"},
    )
    response = {  # an OpenAI chat completion's shape
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini",
        "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 16},
        },
    }
    (item,) = JsonDecoder(spec).decode(orjson.dumps(response), SOURCE)
    assert item.error is None
    event = DECODER.decode(item.raw)
    assert event.usage is not None
    assert event.usage.model_dump(exclude_none=True) == {
        "input_tokens": 20,
        "output_tokens": 9,
        "cached_input_tokens": 16,
        "currency": "USD",
        "finish_reason": "stop",
    }
