"""schemas/feedback.v1.json and streameval.models.Feedback say the same thing; so do the aggregate's
``human`` block and its schema. The same three checks as tests/test_contracts.py."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import BaseModel
from test_contracts import AGGREGATE_FULL, ODD_VALUES, _mutate, _paths, _verdicts

from streameval import schemas
from streameval.models import Aggregate, Feedback

FEEDBACK = [
    {"id": "e1", "passed": True},  # a thumbs up
    {"id": "e2", "score": 0.25},
    {
        "id": "e3",
        "model": "gpt-4o",
        "suite": "qa",
        "passed": False,
        "score": 2,
        "scale": "1-5",
        "criteria": {"accuracy": 1, "style": 4.5},
        "annotator": "ana",
        "comment": "wrong capital",
        "timestamp": "2026-11-25T10:00:00Z",
        "schema_version": 1,
    },
    {"id": "e4", "score": 73, "scale": "0-100", "annotator": "bo", "passed": None},
    {"id": "e5", "score": 10, "scale": "0-10", "criteria": {}},
]
HUMAN = {
    "labels": 40,
    "events": 31,
    "raters": {
        "result": {
            "n": 31,
            "n_pass": 31,
            "kappa": 0.62,
            "kappa_ci_low": 0.4,
            "kappa_ci_high": 0.84,
            "alpha": 0.7,
            "pearson": 0.8,
            "pearson_ci_low": 0.6,
            "pearson_ci_high": 0.9,
            "spearman": 0.78,
            "mae": 0.12,
            "mae_ci_low": 0.08,
            "mae_ci_high": 0.16,
            "bias": -0.03,
        },
        "judge:glm": {"n": 2, "kappa": None},
    },
    "annotators": {"n": 9, "kappa": 1.0},
}
DOCUMENTS: dict[str, tuple[type[BaseModel], list[dict[str, Any]]]] = {
    "feedback": (Feedback, FEEDBACK),
    "aggregate": (Aggregate, [{**AGGREGATE_FULL, "human": HUMAN}, {**AGGREGATE_FULL, "human": None}]),
}


def test_feedback_schema_is_valid_and_closed() -> None:
    schema = schemas.load("feedback")
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    fields = {n: f for n, f in Feedback.model_fields.items()}
    assert set(schema["properties"]) == set(fields)
    assert set(schema["required"]) == {n for n, f in fields.items() if f.is_required()}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_valid_documents_pass_both_and_round_trip(name: str) -> None:
    model, documents = DOCUMENTS[name]
    for document in documents:
        assert _verdicts(name, model, document) == (True, True), document
        parsed = model.model_validate_json(orjson.dumps(document))
        assert model.model_validate_json(parsed.model_dump_json()) == parsed


@pytest.mark.parametrize(
    "document",
    [
        {"id": "e"},
        {"id": "e", "passed": None},
        {"id": "e", "score": 1.5},
        {"id": "e", "score": 0.5, "scale": "1-5"},
        {"id": "e", "score": 11, "scale": "0-10"},
        {"id": "e", "passed": True, "criteria": {"a": 2}},
        {"id": "e", "passed": True, "scale": "1-5", "criteria": {"a": 0}},
        {"id": "", "passed": True},
        {"id": "e", "passed": 1},
        {"id": "e", "passed": True, "extra": 1},
    ],
)
def test_bad_labels_are_refused_by_both(document: dict[str, Any]) -> None:
    assert _verdicts("feedback", Feedback, document) == (False, False)


@pytest.mark.parametrize("name", DOCUMENTS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_mutations_get_the_same_verdict(name: str, data: st.DataObject) -> None:
    model, documents = DOCUMENTS[name]
    document = data.draw(st.sampled_from(documents))
    path = data.draw(st.sampled_from(_paths(document)))
    action = data.draw(st.sampled_from(["drop", "extra", "set"]))
    mutated = _mutate(document, path, action, data.draw(ODD_VALUES))
    schema_ok, model_ok = _verdicts(name, model, mutated)
    assert schema_ok == model_ok, f"schema says {schema_ok}, model says {model_ok} for {mutated}"
