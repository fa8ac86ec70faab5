"""``json`` inputs (a field map over foreign JSON) and the validation of the suite file's ``inputs:``."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from streameval.config import parse_config_text
from streameval.errors import ConfigError
from streameval.inputs import MISSING, JsonDecoder, JsonInput, check_input_topics, compile_path
from streameval.pipeline import Pipeline, Source
from streameval.settings import Settings

DOC = {
    "a": {"b": [10, 20, 30]},
    "msgs": [{"content": "first"}, {"content": "last"}],
    "odd key": {"x y": 1},
    "n": None,
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("$", DOC),
        ("$.a.b[0]", 10),
        ("$.a.b[-1]", 30),
        ("$.msgs[-1].content", "last"),
        ("$['odd key']['x y']", 1),
        ('$["a"].b[1]', 20),
        ("$.n", None),
        ("$.a.b[3]", MISSING),
        ("$.a.b[-4]", MISSING),
        ("$.a.c", MISSING),
        ("$.a.b.c", MISSING),
        ("$.msgs[0][0]", MISSING),
        ("$.a['b'][1]", 20),
    ],
)
def test_path_lookup(path: str, found: Any) -> None:
    assert (
        compile_path(path).find(DOC) == found
        if found is not MISSING
        else compile_path(path).find(DOC) is MISSING
    )


@pytest.mark.parametrize("path", ["a.b", "$.", "$[", "$.a[x]", "$..a", "$.a[*]", "$['a]", "$ .a", "$.1a"])
def test_bad_paths_are_rejected(path: str) -> None:
    with pytest.raises(ValueError, match="path"):
        compile_path(path)


def decoder(**spec: Any) -> JsonDecoder:
    return JsonDecoder(JsonInput(topic="app.completions", format="json", **spec))


MAP = {
    "id": "$.request_id",
    "model": "$.model",
    "output": "$.choices[0].message.content",
    "input": "$.messages[-1].content",
    "category": "$.meta.kind",
}
COMPLETION = {
    "request_id": "req-1",
    "model": "qwen-max",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "北京在哪里？"}],
    "choices": [{"message": {"content": "北京在中国北方。"}}],
    "meta": {"kind": "qa_simple"},
}


def test_map_makes_a_request_event() -> None:
    [item] = decoder(map=MAP, set={"tags": ["from-app"]}).decode(
        orjson.dumps(COMPLETION), Source("app.completions")
    )
    assert item.error is None
    assert orjson.loads(item.raw) == {
        "id": "req-1",
        "model": "qwen-max",
        "output": "北京在中国北方。",
        "input": "北京在哪里？",
        "category": "qa_simple",
        "tags": ["from-app"],
    }


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"choices": []}, "map.output: $.choices[0].message.content found nothing"),
        ({"model": None}, "map.model: $.model found null"),
        ({"meta": {}}, "map.category: $.meta.kind found nothing"),
    ],
)
def test_a_path_that_finds_nothing_is_a_schema_dead_letter(change: dict[str, Any], reason: str) -> None:
    raw = orjson.dumps(COMPLETION | change)
    [item] = decoder(map=MAP).decode(raw, Source("app.completions", 0, 3))
    assert item.error is not None and item.error.kind == "schema" and item.error.reason == reason
    assert item.raw == raw and item.error.event_id == "req-1"


def test_optional_fields_may_be_missing() -> None:
    [item] = decoder(map=MAP, optional=["category", "input"]).decode(
        orjson.dumps(COMPLETION | {"meta": {}}), Source()
    )
    assert item.error is None and "category" not in orjson.loads(item.raw)


def test_derived_id_is_the_sha256_of_the_message() -> None:
    raw = orjson.dumps(COMPLETION)
    spec = {k: v for k, v in MAP.items() if k != "id"}
    [item] = decoder(map=spec, derive_id="sha256").decode(raw, Source())
    assert orjson.loads(item.raw)["id"] == hashlib.sha256(raw).hexdigest()
    assert (
        decoder(map=spec, derive_id="sha256").decode(raw, Source())[0].raw == item.raw
    )  # a redelivery: same id


@pytest.mark.parametrize(
    ("value", "timestamp"),
    [
        (1_780_000_000, "2026-05-28T20:26:40.000Z"),
        (1_780_000_000_500, "2026-05-28T20:26:40.500Z"),
        (1_780_000_000_000_000_000, "2026-05-28T20:26:40.000Z"),
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
    ],
)
def test_numeric_id_and_timestamp_are_converted(value: Any, timestamp: str) -> None:
    raw = orjson.dumps({"id": 42, "m": "x", "o": "y", "t": value})
    [item] = decoder(map={"id": "$.id", "model": "$.m", "output": "$.o", "timestamp": "$.t"}).decode(
        raw, Source()
    )
    assert orjson.loads(item.raw) == {"id": "42", "model": "x", "output": "y", "timestamp": timestamp}


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"not json", "invalid_json"),
        (b'{"a": 1, "a": 2}', "invalid_json"),
        (b"[" * 100 + b"]" * 100, "invalid_json"),
        (b"x" * 5000, "too_large"),
        (b'{"id": "i", "m": "x", "o": "y", "t": 1e300}', "schema"),
    ],
)
def test_bad_messages(raw: bytes, kind: str) -> None:
    spec = {"id": "$.id", "model": "$.m", "output": "$.o", "timestamp": "$.t"}
    [item] = decoder(map=spec, max_message_bytes=4096).decode(raw, Source())
    assert item.error is not None and item.error.kind == kind and item.raw == raw


async def test_a_mapped_event_with_a_wrong_type_is_checked_by_the_pipeline() -> None:
    _, suites = parse_config_text(SUITE)
    [item] = decoder(map={"id": "$.id", "model": "$.m", "output": "$.o"}).decode(
        b'{"id": "i", "m": "x", "o": 5}', Source()
    )
    outcome = await Pipeline(suites).process(item.raw)
    assert (
        outcome.dead_letter is not None
        and outcome.dead_letter.kind == "schema"
        and "output" in outcome.dead_letter.reason
    )


SUITE = """\
suites:
  - {name: s, default: true, evaluators: [{evaluator: exact_match}]}
"""


def problems(inputs: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config_text("inputs:\n" + inputs + SUITE, file="suites.yaml")
    return [str(issue) for issue in caught.value.issues]


def test_input_config_errors_name_file_line_and_field() -> None:
    found = problems("""\
  - {topic: evals.requests, format: native}
  - topic: app.completions
    format: json
    map:
      id: $.request_id
      model: $.models[
      outptu: $.choices[0].text
    optional: [nope]
  - {topic: evals.requests, format: otlp_json}
""")
    assert found == [
        "suites.yaml:7: inputs[1].map.model: path '$.models[': cannot read '[' at character 9; steps are .name, ['key'] or [index]",
        "suites.yaml:8: inputs[1].map.outptu: 'outptu' is not a request field; fields: id, model, output, input, "
        "expected, references, category, suite, tags, metadata, timestamp, report, retrieval, agent, usage, label, "
        "usage.<field> (one of usage's)",
        "suites.yaml:9: inputs[1].optional[0]: 'nope' is not in map",
        "suites.yaml:6: inputs[1].map: map needs 'output'",
        "suites.yaml:10: inputs[2].topic: topic 'evals.requests' is read by an earlier input already",
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "  - {topic: spans, format: otlp}\n",
            "suites.yaml:2: inputs[0].format: unknown input format 'otlp'; valid formats: "
            "native, json, otlp_proto, otlp_json",
        ),
        (
            "  - {topic: spans}\n",
            "suites.yaml:2: inputs[0].format: missing; valid formats: native, json, otlp_proto, otlp_json",
        ),
        (
            "  - {topic: spans, format: otlp_proto, category_attributes: x}\n",
            "suites.yaml:2: inputs[0].category_attributes: Extra inputs are not permitted",
        ),
        (
            "  - {topic: a, format: json, map: {model: $.m, output: $.o}}\n",
            "suites.yaml:2: inputs[0].map: map needs 'id' (or derive_id: sha256)",
        ),
        (
            "  - {topic: a, format: json, map: {id: $.i, model: $.m, output: $.o}, derive_id: sha256}\n",
            "suites.yaml:2: inputs[0].derive_id: map sets id already; drop derive_id or map.id",
        ),
        (
            "  - {topic: a, format: json, map: {model: $.m, output: $.o}, derive_id: md5}\n",
            "suites.yaml:2: inputs[0].derive_id: Input should be 'sha256'",
        ),
        (
            "  - {topic: 'a b', format: native}\n",
            "suites.yaml:2: inputs[0].topic: String should match pattern '^[A-Za-z0-9._\\-]+$'",
        ),
    ],
)
def test_one_bad_input(entry: str, expected: str) -> None:
    assert problems(entry) == [expected]


def test_an_input_cannot_read_an_output_topic() -> None:
    _, suites = parse_config_text("inputs:\n  - {topic: evals.results, format: native}\n" + SUITE)
    with pytest.raises(ConfigError, match=r"inputs\[0\].topic: 'evals.results' is the worker's output topic"):
        check_input_topics(suites.inputs, Settings(), file="suites.yaml")
