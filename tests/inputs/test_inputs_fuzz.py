"""Hypothesis against the OTLP decoders: any bytes, mutated real exports, and OTLP/JSON of any shape.

Whatever arrives, a decoder never raises: each message gives request events the pipeline accepts or
rejects with a dead letter of a named kind, never an internal error, and a message it cannot read
becomes exactly one dead letter carrying its bytes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from _otel import (
    export_json,
    export_proto,
    gen_ai_span,
    http_span,
    openinference_span,
    openllmetry_span,
    record,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.batch import evaluate_items
from streameval.config import parse_config
from streameval.inputs import Item, OtlpDecoder, OtlpInput
from streameval.pipeline import Pipeline, Source

_, SUITES = parse_config(
    {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
)
PIPELINE = Pipeline(SUITES)
PROTO = OtlpDecoder(
    OtlpInput(topic="spans", format="otlp_proto", category_attribute="cat", tag_attributes=["tag"])
)
JSON = OtlpDecoder(
    OtlpInput(topic="spans", format="otlp_json", category_attribute="cat", tag_attributes=["tag"])
)
SOURCE = Source("spans", 0, 1)


def _export() -> list[Any]:
    with record() as (tracer, finished):
        gen_ai_span(tracer, prompt="问题", answer="回答")
        openllmetry_span(tracer, prompt="q", answer="a")
        openinference_span(tracer, prompt="q", answer="a")
        http_span(tracer)
        return list(finished())


SPANS = _export()
VALID_PROTO, VALID_JSON = export_proto(SPANS), export_json(SPANS)


def check(items: list[Item], raw: bytes) -> None:
    """The decoder's contract, and the pipeline's verdict on what it made."""
    assert all(isinstance(i, Item) for i in items)
    if any(i.error is not None and i.source == SOURCE for i in items):  # the whole message failed
        [item] = items
        assert item.raw == raw and item.error is not None and item.error.reason
    for item in items:
        if item.error is None:
            event = orjson.loads(item.raw)
            assert item.source.item == event["id"]
    outcomes = asyncio.run(evaluate_items(PIPELINE, items))
    assert len(outcomes) == len(items)
    for outcome in outcomes:
        assert (outcome.result is None) != (outcome.dead_letter is None)
        if outcome.dead_letter is not None:
            assert outcome.dead_letter.kind != "internal", outcome.dead_letter.reason


fuzz = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fuzz
@given(st.binary(max_size=2048))
def test_any_bytes_as_otlp_proto(raw: bytes) -> None:
    check(PROTO.decode(raw, SOURCE), raw)


@fuzz
@given(st.binary(max_size=2048))
def test_any_bytes_as_otlp_json(raw: bytes) -> None:
    check(JSON.decode(raw, SOURCE), raw)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if action == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[at:]
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[at : at + draw(st.integers(1, 16))]
    return bytes(data)


@fuzz
@given(mutated(VALID_PROTO))
def test_mutated_protobuf_exports(raw: bytes) -> None:
    check(PROTO.decode(raw, SOURCE), raw)


@fuzz
@given(mutated(VALID_JSON))
def test_mutated_json_exports(raw: bytes) -> None:
    check(JSON.decode(raw, SOURCE), raw)


# -- OTLP/JSON documents of any shape: the right keys with values of any type -------------------------
i64 = st.integers(-(2**63), 2**63 - 1)
junk = st.recursive(
    st.none() | st.booleans() | i64 | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def any_value(junk_ok: bool) -> st.SearchStrategy[Any]:
    """An OTLP/JSON AnyValue; with ``junk_ok``, also values of the wrong shape."""
    bad = junk if junk_ok else st.nothing()
    leaves = st.one_of(
        st.builds(lambda v: {"stringValue": v}, st.text(max_size=30)),
        st.builds(lambda v: {"intValue": v}, i64.map(str) | i64 | bad),
        st.builds(lambda v: {"doubleValue": v}, st.floats().map(lambda f: f if f == f else "NaN") | bad),
        st.builds(lambda v: {"boolValue": v}, st.booleans() | bad),
        st.builds(lambda v: {"bytesValue": v}, st.text(max_size=8) | bad),
        st.just({}),
        bad,
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3))
            | st.builds(
                lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
                st.lists(st.tuples(st.text(max_size=8), inner), max_size=3),
            )
        ),
        max_leaves=10,
    )


KEYS = [
    "gen_ai.operation.name",
    "llm.request.type",
    "openinference.span.kind",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "llm.model_name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.0.role",
    "gen_ai.completion.0.content",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.content",
    "input.value",
    "output.value",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "cat",
    "tag",
    "other",
    "content",
    "message",
    "index",
]
LLM_VALUES = {
    "gen_ai.operation.name": "chat",
    "llm.request.type": "completion",
    "openinference.span.kind": "LLM",
}
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", 3]),
            "parts": st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["text", "tool_call"]), "content": st.text(max_size=20) | junk}
                ),
                max_size=3,
            ),
        }
    ),
    max_size=3,
).map(lambda m: orjson.dumps(m).decode())


def export(junk_ok: bool) -> st.SearchStrategy[dict[str, Any]]:
    bad = junk if junk_ok else st.nothing()
    attribute = st.one_of(
        st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(KEYS), any_value(junk_ok)),
        st.builds(
            lambda k: {"key": k, "value": {"stringValue": LLM_VALUES[k]}}, st.sampled_from(sorted(LLM_VALUES))
        ),
        st.builds(
            lambda k, t: {"key": k, "value": {"stringValue": t}},
            st.sampled_from(KEYS),
            st.text(max_size=300) | MESSAGES,
        ),
        bad,
    )
    # half the spans look like a real LLM span (marked, a model, output text) before any other attributes
    plausible = st.sampled_from(
        [
            [],
            [
                {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
                {"key": "llm.model_name", "value": {"stringValue": "m"}},
                {"key": "output.value", "value": {"stringValue": "out"}},
            ],
        ]
    )
    hex_id = st.one_of(st.binary(min_size=16, max_size=16).map(bytes.hex), st.text(max_size=40), bad)
    events = st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "x"]),
                "attributes": st.lists(attribute, max_size=4),
            }
        ),
        max_size=3,
    )
    span = st.fixed_dictionaries(
        {},
        optional={
            "traceId": hex_id,
            "spanId": st.binary(min_size=8, max_size=8).map(bytes.hex) | bad,
            "name": st.text(max_size=10) | bad,
            "endTimeUnixNano": st.integers(-10, 2**64).map(str) | i64 | bad,
            "attributes": st.builds(
                lambda base, more: base + more, plausible, st.lists(attribute, max_size=8)
            )
            | bad,
            "events": events | bad,
        },
    )
    return st.builds(
        lambda spans, resource: {
            "resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"spans": spans}]}]
        },
        st.lists(span, max_size=6),
        st.lists(attribute, max_size=3),
    )


@fuzz
@given(export(junk_ok=False))
def test_otlp_json_of_any_attributes(document: dict[str, Any]) -> None:
    raw = orjson.dumps(document)
    check(JSON.decode(raw, SOURCE), raw)


@fuzz
@given(export(junk_ok=True))
def test_otlp_json_of_any_shape(document: dict[str, Any]) -> None:
    raw = orjson.dumps(document)
    check(JSON.decode(raw, SOURCE), raw)
