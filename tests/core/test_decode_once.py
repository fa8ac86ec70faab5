"""Decoding an event once gives what the two-parse decode gave: the same event or the same rejection.

:meth:`Pipeline.decode` first tries one strict parse (orjson's for bytes that are exactly orjson's writing,
else the strict pass's) validated from Python objects (``EventDecoder._decode_once``,
:func:`streameval.strictjson.parse_plain`); when that declines, the usual
way runs (depth, pydantic's JSON validation, the strict pass). Here every event of the corpora, edge
documents and drawn documents is decoded both ways: the events must be equal value for value (types,
float signs, key order, fields set) and rejections identical (kind, reason, event id).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metrics_corpus import multi_reference, text_pairs
from pydantic import BaseModel

from streameval import pipeline as pipeline_module
from streameval import strictjson
from streameval.config import parse_config
from streameval.errors import EventError
from streameval.event_decoder import EventDecoder
from streameval.pipeline import Pipeline
from streameval.strictjson import parse_plain

ROOT = Path(__file__).resolve().parents[2]
_, SUITES = parse_config(
    {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "contains"}]}]}
)
DECODE_ONCE = EventDecoder._decode_once
PIPELINES = [Pipeline(SUITES), Pipeline(SUITES, max_event_bytes=4096, max_event_depth=3)]


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (1 and 1.0, 0.0 and -0.0 differ), dictionaries in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseModel):
        return a.model_fields_set == b.model_fields_set and _same(a.__dict__, b.__dict__)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def _decoded(pipeline: Pipeline, raw: Any) -> Any:
    try:
        return pipeline.decode(raw)
    except EventError as exc:
        return (type(exc), exc.kind, exc.reason, exc.event_id)


def _check(raw: Any, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways agree on ``raw`` for each pipeline; True when the single parse was taken for the first."""
    once = False
    for n, pipeline in enumerate(PIPELINES):
        taken = {"once": False}

        def spy(self: EventDecoder, data: bytes, taken: dict[str, bool] = taken) -> Any:
            event = DECODE_ONCE(self, data)
            taken["once"] = event is not None
            return event

        with monkeypatch.context() as patch:
            patch.setattr(EventDecoder, "_decode_once", spy)
            new = _decoded(pipeline, raw)
        with monkeypatch.context() as patch:
            patch.setattr(EventDecoder, "_decode_once", lambda self, data: None)
            old = _decoded(pipeline, raw)
        assert _same(new, old), (raw[:200], new, old)
        once = once or (n == 0 and taken["once"])
    return once


def _corpus() -> list[bytes]:
    lines = [line for line in (ROOT / "examples" / "events.jsonl").read_bytes().splitlines() if line.strip()]
    for i, (output, expected) in enumerate(text_pairs()):
        event: dict[str, Any] = {"id": f"p{i}", "model": "m", "output": output, "expected": expected}
        if i % 5 == 0:
            event["metadata"] = {"n": i, "x": i / 7, "tags": [output[:5], None, True], "d": {"k": -0.0}}
        lines.append(orjson.dumps(event))
        lines.append(json.dumps(event).encode())  # non-ASCII as \\u escapes (surrogate pairs too)
        lines.append(json.dumps(event, indent=1, ensure_ascii=False).encode())
    for i, (output, references) in enumerate(multi_reference()):
        lines.append(orjson.dumps({"id": f"r{i}", "model": "m", "output": output, "references": references}))
    return lines


def test_the_corpora_decode_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _corpus()
    once = sum(_check(raw, monkeypatch) for raw in lines)
    assert len(lines) > 1000 and once > 0.9 * len(lines)  # the single parse is the usual way


BASE = '{"id":"a","model":"m","output":"x"%s}'
EDGES = [
    *(
        (BASE % f',"metadata":{{"v":{v}}}').encode()
        for v in [
            "1e-400",
            "1" * 300,
            "1" * 400,
            "1.0e+2",
            "0e0",
            "-0.0e-0",
            "-0",
            "1E2",
            "1e0000000000000001",
            "0.10000000000000000000000000000000000000000001",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "4.9e-324",
            "NaN",
            "-Infinity",
            '[1,2.5,"x",null,true,{}]',
            '"\\ud800"',
            '"x\\udc00"',
            '"\\ud83d\\ude00"',
            '"\\uD83D\\uDE00"',
            '"\\u0000\\/\\b"',
            '"\x7f"',
            '"\x1f"',
            '"\t"',
            '{"\\ud800":1}',
            '{"a":1,"a":2}',
            "[[[[[1]]]]]",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "1e+16",
            "1.0",
            "0.1",
            '"\\u00e9"',
            '"é"',
            '"\\u001f\\n\\"\\\\"',
            '{"a":[],"b":{}}',
        ]
    ),
    (BASE % ',"output":"y"').encode(),  # a duplicate top-level key
    (BASE % ',"input":"\\ud800"').encode(),
    (BASE % ',"expected":"\xed\xa0\x80"').encode("utf-8", "surrogatepass"),  # an encoded surrogate
    (BASE % ',"expected":"é"').encode("latin-1"),  # not UTF-8
    (BASE % "").encode("utf-16"),
    b"\xef\xbb\xbf" + (BASE % "").encode(),  # a BOM
    b" " + (BASE % "").encode(),
    (BASE % "").encode() + b" \n\t\r",
    (BASE % "").encode() + b"\x0c",
    (BASE % "").encode() + b"{}",
    (BASE % ',"schema_version":1').encode(),
    (BASE % ',"schema_version":1.0').encode(),
    (BASE % ',"schema_version":true').encode(),
    (BASE % ',"label":1').encode(),
    (BASE % ',"label":false').encode(),
    (BASE % ',"tags":["a",1]').encode(),
    (BASE % ',"references":[["a"]]').encode(),
    (BASE % ',"unknown":1').encode(),
    (BASE % ',"timestamp":"2026-11-21T10:00:00Z"').encode(),
    (BASE % ',"timestamp":"yesterday"').encode(),
    (BASE % ',"agent":{"task_quality":1,"results":[{"domain":"d","score":0}]}').encode(),
    (BASE % ',"retrieval":{"latency_s":1,"chunks":[{"id":"c","text":"\\ud800"}]}').encode(),
    (BASE % ',"report":{"word_count":1.0}').encode(),
    (BASE % ',"metadata":{"a":{"b":{"c":{"d":1}}}}').encode(),  # depth 5: over the second pipeline's 3
    (BASE % ',"metadata":{}').encode(),
    b'{"id":"","model":"m","output":"x"}',
    b'{"model":"m","output":"x"}',
    b"[]",
    b"{}",
    b"{",
    b"",
    b"null",
    b'{"id":"a","model":"m","output":"x"',
    b"[" * 5000 + b"]" * 5000,
    b'{"id":"a","model":"m","output":"x","metadata":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"id":"a","model":"m","output":"x","metadata":{"v":"' + b"y" * 5000 + b'"}}',  # over 4096 bytes
]


@pytest.mark.parametrize("raw", EDGES)
def test_edge_documents_decode_alike(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(raw, monkeypatch)


def test_orjson_writing_is_read_by_orjson_and_the_rest_by_the_strict_pass() -> None:
    event = {"id": "a", "model": "m", "output": 'é \u001f "x"', "metadata": {"n": [1, 2.5, -0.0, None]}}
    canonical = orjson.dumps(event)
    assert strictjson._canonical(canonical) == event
    assert strictjson._canonical(json.dumps(event).encode()) is None  # ": " after the first key
    for other in (
        json.dumps(event, separators=(",", ":")).encode(),  # \u escapes
        canonical.replace(b"2.5", b"25e-1"),  # another number form
        canonical.replace(b'"model":"m"', b'"model":"m","model":"m"'),  # a duplicate key
    ):
        assert strictjson._canonical(other) is None
        assert parse_plain(other) == (None if b'"model":"m","model"' in other else event)


def test_only_bytes_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (BASE % "").encode()
    assert parse_plain(raw) == {"id": "a", "model": "m", "output": "x"}
    assert parse_plain(bytearray(raw)) is None and parse_plain(memoryview(raw)) is None  # type: ignore[arg-type]
    _check(bytearray(raw), monkeypatch)


TEXT = st.text(st.characters() | st.sampled_from("\ud800\udfff"), max_size=8)  # lone surrogates too
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = st.fixed_dictionaries(
    {"id": st.text(max_size=4), "model": st.just("m"), "output": TEXT},
    optional={
        "expected": st.text(max_size=6) | st.none() | st.integers(),
        "references": st.lists(st.text(max_size=3) | st.integers(), max_size=2),
        "tags": st.lists(st.text(max_size=3), max_size=2),
        "metadata": st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=3) | JSON_VALUES,
        "label": st.booleans() | st.integers(0, 1),
        "schema_version": st.sampled_from([1, 1.0, True, 2]),
        "category": st.text(max_size=3) | st.none(),
        "agent": st.fixed_dictionaries({}, optional={"task_quality": st.integers(0, 2) | st.floats(0, 1)}),
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=FIELDS, form=st.sampled_from(["ascii", "utf8", "indented"]), cut=st.integers(0, 8))
def test_drawn_documents_decode_alike(
    fields: dict[str, Any], form: str, cut: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        text = json.dumps(fields, ensure_ascii=form == "ascii", indent=1 if form == "indented" else None)
    except ValueError:
        return
    raw = text.encode("utf-8", "surrogatepass")
    _check(raw, monkeypatch)
    if cut:
        _check(raw[:-cut], monkeypatch)  # truncated


def test_the_single_parse_is_the_strict_pass_plus_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"json": 0}
    validate_json = pipeline_module.RequestEvent.model_validate_json

    def counted(raw: bytes) -> Any:
        calls["json"] += 1
        return validate_json(raw)

    monkeypatch.setattr(pipeline_module.RequestEvent, "model_validate_json", counted)
    event = PIPELINES[0].decode((BASE % ',"expected":"x"').encode())
    assert event.expected == "x" and calls["json"] == 0
