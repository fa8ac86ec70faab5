"""Each JSON Schema in schemas/ and its pydantic model in streameval.models say the same thing.

Checked three ways: the same property names and required sets; the same verdict on valid
documents and on Hypothesis mutations of them (dropped fields, wrong types, unknown fields, nulls,
empty strings); and decode(encode(x)) == x. The pydantic verdict is taken through
``model_validate_json``, the path the worker uses.

One known, deliberate difference: a JSON float with no fraction (``1.0``) where the contract says
integer. JSON Schema counts it as an integer; the strict models do not. Such values are rejected
(dead-lettered) with the model's reason; ``test_integral_float_is_rejected_by_the_model`` pins it.
A second one: the request's ``usage`` parts may not exceed their totals (cached input tokens within input
tokens, reasoning within output tokens, time to first token within the duration), which JSON Schema cannot
compare; the schema says so in words and ``test_usage_parts_within_totals_is_the_models_check`` pins it
(the valid documents' parts are 0, so no mutation reaches it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from streameval import schemas
from streameval.config import load_config
from streameval.features.setup import annotators
from streameval.models import RequestEvent
from streameval.offline import evaluate_file
from streameval.outputs import OUTPUTS
from streameval.pipeline import Pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAIRS: list[tuple[str, type[BaseModel]]] = [("request", RequestEvent), *((o.kind, o.model) for o in OUTPUTS)]

WINDOW = {"size_s": 60, "start": "2026-11-21T10:00:00Z", "end": "2026-11-21T10:01:00Z"}
ALERT = {
    "id": "a1",
    "rule": "low-mean",
    "severity": "warning",
    "metric": "mean_score",
    "comparator": "<",
    "threshold": 0.6,
    "value": 0.41,
    "count": 120,
    "model": "gpt-4o",
    "suite": "qa",
    "window": WINDOW,
    "message": "mean score 0.41 < 0.6",
    "fired_at": "2026-11-21T10:01:02.500Z",
}
AGGREGATE = {
    "model": "gpt-4o",
    "suite": "qa",
    "window": WINDOW,
    "count": 120,
    "mean": 0.71,
    "std": 0.2,
    "pass_rate": 0.8,
    "grades": {"excellent": 60, "pass": 36, "fail": 24},
    "evaluators": {"exact_match": {"count": 120, "mean": 0.5, "pass_rate": 0.5}},
    "published_at": "2026-11-21T10:01:05Z",
}
# with every optional field of the window statistics (docs/statistics.md), so mutations reach them too
AGGREGATE_FULL = {
    **AGGREGATE,
    "ci_low": 0.67,
    "ci_high": 0.75,
    "dead_letters": 3,
    "dead_letter_rate": 0.024,
    "judge_error_rate": 0.01,
    "tokens": {"prompt": 1200, "completion": 300},
    "latency_p95_ms": 250.0,
    "judges": {
        "glm": {"n": 100, "mean": 7.1, "std": 1.2, "errors": 1, "error_rate": 0.0099, "drift": 0.4},
        "new": {"n": 0, "mean": None, "std": None, "errors": 0, "error_rate": None, "drift": None},
    },
    "judge_pearson": {"deepseek|glm": 0.83, "glm|minimax": None},
    "alpha": 0.71,
    "consistency": 0.9,
    "consistency_n": 12,
    "late": 2,
    "late_redirected": 1,
    "warnings": ["consistency 0.75 < 0.8"],
    "usage": {
        "events": 118,
        "input_tokens": 90000,
        "output_tokens": 21000,
        "cached_input_tokens": 40000,
        "reasoning_tokens": 0,
        "currency": "USD",
        "cost": 0.42,
        "priced": 118,
        "unpriced": 2,
        "cost_per_event": 0.00356,
        "duration_p50_ms": 812.8,
        "duration_p95_ms": 2511.9,
        "duration_p99_ms": None,
        "ttft_p50_ms": None,
        "ttft_p95_ms": None,
        "finish_reasons": {"stop": 110, "length": 8},
    },
}
ALERT_FULL = {**ALERT, "min_count": 20, "cooldown_s": 300, "figures": {"mean": 0.41, "alpha": None}}
REVIEW = {
    "id": "e1",
    "model": "gpt-4o",
    "suite": "qa",
    "reasons": ["judges_disagree"],
    "reason": "spread 4 >= 3",
    "score": 0.58,
    "passed": False,
    "threshold": 0.6,
    "event_time": "2026-11-21T10:00:00Z",
    "selected_at": "2026-11-21T10:00:01.250Z",
}
REVIEW_FULL = {
    **REVIEW,
    "schema_version": 1,
    "reasons": ["gate_failed", "near_threshold"],
    "judges": {"a": 9.0, "b": None},
    "judge_spread": 0.0,
    "failed_gates": ["no_pii"],
    "input": "q",
    "output": None,
}
ALERT_SHIFT = {
    **ALERT,
    "metric": "score_shift",
    "change": {
        "series": "evaluator:similarity",
        "direction": "down",
        "start": "2026-11-21T10:00:00Z",
        "event_id": "ev-1",
        "shift": -0.1,
        "reference_mean": 0.7,
        "reference_std": 0.15,
        "ewma": 0.62,
        "events_since": 80,
    },
}

ALERT_DRIFT = {  # embedding drift (docs/drift.md): the alert v1 schema as it was, a metric and its figures
    **ALERT,
    "id": "embedding_drift:300:2026-11-21T10:00:00.000Z:m:qa",
    "rule": "embedding_drift",
    "metric": "embedding_drift",
    "comparator": ">",
    "threshold": 0.05,
    "value": 0.631,
    "count": 20,
    "figures": {
        "centroid_distance": 1.01,
        "centroid_threshold": None,
        "mmd2": 0.631,
        "mmd_threshold": 0.05,
        "count": 20.0,
        "reference_count": 200.0,
    },
    "examples": ["w11-3", "w11-7", "w11-0"],
}


@pytest.fixture(scope="module")
def valid_documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Real documents: the example events, and the results and dead letters the pipeline makes of them."""
    tmp = tmp_path_factory.mktemp("contracts")
    _, suites = load_config(EXAMPLES / "suites.yaml")
    asyncio.run(
        evaluate_file(
            Pipeline(suites, annotators=annotators(suites)),
            EXAMPLES / "events.jsonl",
            tmp / "out.jsonl",
            tmp / "dl.jsonl",
        )
    )
    requests = []
    for line in (EXAMPLES / "events.jsonl").read_bytes().splitlines():
        try:
            RequestEvent.model_validate_json(line)
        except ValidationError:
            continue
        requests.append(orjson.loads(line))
    requests.append(
        {
            "id": "full",
            "model": "m",
            "output": "o",
            "input": None,
            "expected": None,
            "references": [],
            "category": "qa_simple",
            "suite": "qa",
            "tags": ["a"],
            "metadata": {"k": [1, {"x": None}]},
            "timestamp": "2026-11-21T10:00:00.123456+08:00",
            "schema_version": 1,
            "usage": {
                "input_tokens": 1200,
                "output_tokens": 300,
                "cached_input_tokens": 0,
                "reasoning_tokens": 0,
                "duration_ms": 812.5,
                "time_to_first_token_ms": 0,
                "cost": 0.0031,
                "currency": "USD",
                "finish_reason": "stop",
            },
        }
    )
    load = lambda p: [orjson.loads(x) for x in p.read_bytes().splitlines()]  # noqa: E731
    dead = load(tmp / "dl.jsonl")
    # a dead letter cut to fit the broker (streameval.deadletters), so mutations reach `truncated` too
    dead.append(
        {
            **dead[0],
            "raw": "aGVhZA==",
            "truncated": {
                "length": 900000,
                "sha256": "ab" * 32,
                "tail": "dGFpbA==",
                "stored_key": "streameval:dlraw:" + "ab" * 32,
                "stored_until": "2026-11-30T10:00:00Z",
            },
        }
    )
    return {
        "request": requests,
        "result": load(tmp / "out.jsonl"),
        "deadletter": dead,
        "alert": [ALERT, ALERT_FULL, ALERT_SHIFT, ALERT_DRIFT],
        "aggregate": [AGGREGATE, AGGREGATE_FULL],
        "session": _session_results(tmp),
        "review": [REVIEW, REVIEW_FULL],
    }


def _session_results(tmp: Path) -> list[dict[str, Any]]:
    """Session results the offline pipeline makes of a short conversation (streameval.features.sessions)."""
    config = tmp / "sessions.yaml"
    config.write_text(
        "suites: [{name: chat, default: true, evaluators: [{evaluator: exact_match}]}]\n"
        "sessions: [{name: conv, key: metadata.c, end: metadata.last, evaluators: "
        "[{evaluator: turn_scores}, {evaluator: thread_clean, weight: 0, gate: true}]}]\n"
    )
    turns = [
        {
            "id": f"t{i}",
            "model": "m",
            "input": "q",
            "output": "Paris" if i else "Rome",
            "expected": "Paris",
            "timestamp": f"2026-11-21T10:00:0{i}Z",
            "metadata": {
                "c": f"c{i % 2}",
                "last": i == 3,
                "tool_calls": [{"name": "f", "arguments": {"a": 1}, "error": "boom" if i == 2 else None}],
            },
        }
        for i in range(4)
    ]
    (tmp / "turns.jsonl").write_bytes(b"\n".join(orjson.dumps(t) for t in turns))
    _, suites = load_config(config)
    asyncio.run(
        evaluate_file(
            Pipeline(suites, annotators=annotators(suites)),
            tmp / "turns.jsonl",
            tmp / "t.jsonl",
            tmp / "tdl.jsonl",
            sessions_path=tmp / "sessions.jsonl",
        )
    )
    found = [orjson.loads(x) for x in (tmp / "sessions.jsonl").read_bytes().splitlines()]
    assert len(found) == 2
    return found


def _verdicts(name: str, model: type[BaseModel], document: Any) -> tuple[bool, bool]:
    schema_ok = Draft202012Validator(schemas.load(name)).is_valid(document)
    try:
        model.model_validate_json(orjson.dumps(document))
        model_ok = True
    except ValidationError:
        model_ok = False
    return schema_ok, model_ok


@pytest.mark.parametrize(("name", "model"), PAIRS)
def test_schema_is_valid_2020_12(name: str, model: type[BaseModel]) -> None:
    schema = schemas.load(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(("name", "model"), PAIRS)
def test_same_properties_and_required(name: str, model: type[BaseModel]) -> None:
    schema = schemas.load(name)
    fields = {f.alias or n: f for n, f in model.model_fields.items()}
    assert set(schema["properties"]) == set(fields)
    assert set(schema["required"]) == {n for n, f in fields.items() if f.is_required()}


@pytest.mark.parametrize(("name", "model"), PAIRS)
def test_valid_documents_pass_both(
    name: str, model: type[BaseModel], valid_documents: dict[str, list[Any]]
) -> None:
    assert valid_documents[name], f"no {name} documents to check"
    for document in valid_documents[name]:
        assert _verdicts(name, model, document) == (True, True), document


@pytest.mark.parametrize(("name", "model"), PAIRS)
def test_round_trip(name: str, model: type[BaseModel], valid_documents: dict[str, list[Any]]) -> None:
    for document in valid_documents[name]:
        parsed = model.model_validate_json(orjson.dumps(document))
        assert model.model_validate_json(parsed.model_dump_json()) == parsed


# Values of every JSON type, including edge cases, to put where they do not belong.
ODD_VALUES = st.sampled_from(
    [None, True, 0, -1, 2.5, "", "x", "2026-11-21T10:00:00Z", [], ["x"], [1], {}, {"a": 1}]
)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            out += _paths(value, (*prefix, index))
    return out


def _mutate(document: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    doc = orjson.loads(orjson.dumps(document))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "drop" and isinstance(parent, dict):
        del parent[last]
    elif action == "extra" and isinstance(parent, dict):
        parent["unexpected_field"] = value
    else:
        parent[last] = value
    return doc


@pytest.mark.parametrize(("name", "model"), PAIRS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutations_get_the_same_verdict(
    name: str, model: type[BaseModel], valid_documents: dict[str, list[Any]], data: st.DataObject
) -> None:
    document = data.draw(st.sampled_from(valid_documents[name]))
    path = data.draw(st.sampled_from(_paths(document)))
    action = data.draw(st.sampled_from(["drop", "extra", "set"]))
    mutated = _mutate(document, path, action, data.draw(ODD_VALUES))
    schema_ok, model_ok = _verdicts(name, model, mutated)
    assert schema_ok == model_ok, f"schema says {schema_ok}, model says {model_ok} for {mutated}"


def test_integral_float_is_rejected_by_the_model() -> None:
    document = {"id": "e", "model": "m", "output": "o", "schema_version": 1.0}
    assert _verdicts("request", RequestEvent, document) == (True, False)


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 10, "cached_input_tokens": 11},
        {"output_tokens": 1, "reasoning_tokens": 2},
        {"duration_ms": 1, "time_to_first_token_ms": 2},
    ],
)
def test_usage_parts_within_totals_is_the_models_check(usage: dict[str, Any]) -> None:
    document = {"id": "e", "model": "m", "output": "o", "usage": usage}
    assert _verdicts("request", RequestEvent, document) == (True, False)


def test_alert_metric_names_are_the_metrics_read() -> None:
    """The alert rule's ``metric`` literal (what a suite file may name) and METRICS (how each is read)
    list the same names: a metric added to one and not the other fails here, not at a rule's first firing."""
    from typing import get_args

    from streameval.alerts import METRICS, AlertRule, Metric

    assert sorted(get_args(Metric)) == sorted(METRICS)
    for name in METRICS:
        AlertRule(name="r", metric=name, comparator="<", threshold=0.5, window=60)
