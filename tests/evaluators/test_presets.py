"""The evaluator-module spec's presets: every example of the spec, then edge cases."""

from __future__ import annotations

from typing import Any

import pytest
from _support import event as request_event
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streameval.errors import EvaluatorTimeout
from streameval.evaluators import MissingField, build_evaluator
from streameval.evaluators.presets import cosine, jaccard, levenshtein
from streameval.models import RequestEvent


def event(output: str, expected: str | None = None, **fields: Any) -> RequestEvent:
    return request_event(id="e1", output=output, expected=expected, **fields)


# the evaluator-module spec §3: the examples, as written in the spec
@pytest.mark.parametrize(
    ("name", "params", "output", "expected", "passed", "score"),
    [
        ("exact_match", {}, "中国", "中国", True, 1.0),  # §3.1
        ("contains", {}, "北京是中国的首都，有着悠久的历史...", "首都", True, 1.0),  # §3.2
    ],
)
def test_seed_001_examples(
    name: str, params: dict[str, Any], output: str, expected: str, passed: bool, score: float
) -> None:
    result = build_evaluator(name, params).evaluate(event(output, expected))
    assert (result.passed, result.score) == (passed, score)


@pytest.mark.parametrize(
    ("output", "expected", "passed"),
    [
        ("Paris", "Paris", True),
        ("Paris", "paris", False),  # spec: output === expected, no normalisation
        ("Paris ", "Paris", False),
        ("", "", True),
        ("", "x", False),
        ("東京", "东京", False),  # traditional vs simplified are different strings
    ],
)
def test_exact_match(output: str, expected: str, passed: bool) -> None:
    result = build_evaluator("exact_match").evaluate(event(output, expected))
    assert result.passed is passed
    assert result.score == (1.0 if passed else 0.0)


def test_exact_match_uses_references_when_no_expected() -> None:
    ev = event("b", None, references=["a", "b"])
    result = build_evaluator("exact_match").evaluate(ev)
    assert result.passed and result.details == {"target": 1}


def test_missing_expected_is_an_error_not_a_pass() -> None:
    with pytest.raises(MissingField):
        build_evaluator("exact_match").evaluate(event("anything"))
    with pytest.raises(MissingField):
        build_evaluator("contains").evaluate(event("anything"))


@pytest.mark.parametrize(
    ("params", "output", "expected", "passed"),
    [
        ({}, "The answer is 42.", "42", True),
        ({}, "The answer is 41.", "42", False),
        ({}, "anything", "", True),  # spec: includes('') is true
        ({}, "HELLO world", "hello", False),
        ({"ignore_case": True}, "HELLO world", "hello", True),
        ({"value": "disclaimer"}, "a disclaimer here", None, True),  # fixed value: no expected needed
        ({"ignore_case": True}, "ǅungla", "ǆUNGLA", True),  # casefold, not lower
    ],
)
def test_contains(params: dict[str, Any], output: str, expected: str | None, passed: bool) -> None:
    assert build_evaluator("contains", params).evaluate(event(output, expected)).passed is passed


@pytest.mark.parametrize(
    ("pattern", "flags", "output", "passed"),
    [
        (r"^\d{4}-\d{2}-\d{2}$", "", "2026-11-21", True),  # dates (spec §3.3 use case)
        (r"^\d{4}-\d{2}-\d{2}$", "", "21/11/2026", False),
        (r"^[\w.+-]+@[\w-]+\.[\w.]+$", "", "ops@example.com", True),  # emails
        ("hello", "i", "HeLLo there", True),
        ("hello", "", "HeLLo there", False),
        ("^b", "m", "a\nb", True),
        ("a.b", "s", "a\nb", True),
        (r"\p{Han}{2}", "", "模型", True),  # CJK via Unicode properties
        ("", "", "", True),
    ],
)
def test_regex(pattern: str, flags: str, output: str, passed: bool) -> None:
    assert (
        build_evaluator("regex", {"pattern": pattern, "flags": flags}).evaluate(event(output)).passed
        is passed
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pattern": "(unclosed"}, "invalid regular expression"),
        ({"pattern": "[z-a]"}, "invalid regular expression"),
        ({"pattern": "a", "flags": "q"}, "unknown regex flag"),
        ({"pattern": "a", "timeout_ms": 0}, "greater than 0"),
        ({}, "Field required"),
    ],
)
def test_regex_bad_params_fail_at_build(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        build_evaluator("regex", params)


def test_catastrophic_regex_times_out_instead_of_hanging() -> None:
    evaluator = build_evaluator("regex", {"pattern": r"(a|aa)+$", "timeout_ms": 50})
    with pytest.raises(EvaluatorTimeout, match="timed out after 50 ms"):
        evaluator.evaluate(event("a" * 60 + "b"))
    # the same compiled evaluator keeps working on the next event
    assert evaluator.evaluate(event("aaaa")).passed


SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("output", "passed", "reason"),
    [
        ('{"name": "Ada", "age": 36}', True, "satisfies"),
        ('{"name": "Ada"}', False, "$: 'age' is a required property"),
        ('{"name": "Ada", "age": -1}', False, "$.age: -1 is less than the minimum of 0"),
        ('{"name": "Ada", "age": "36"}', False, "$.age: '36' is not of type 'integer'"),
        ('{"name": "Ada", "age": 3, "x": 1}', False, "Additional properties are not allowed"),
        ("{'name': 'Ada'}", False, "not valid JSON"),  # spec §3.4: parse failure fails
        ("", False, "not valid JSON"),
        ("NaN", False, "not valid JSON"),
        ('```json\n{"name": "Ada", "age": 36}\n```', False, "not valid JSON"),
        ('{"name": "李白", "age": 61}', True, "satisfies"),
    ],
)
def test_json_schema(output: str, passed: bool, reason: str) -> None:
    result = build_evaluator("json_schema", {"schema": SCHEMA}).evaluate(event(output))
    assert result.passed is passed
    assert reason in (result.reason or "")


def test_json_schema_lists_errors_in_path_order_and_caps_them() -> None:
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcdefg"}}
    output = '{"g": "x", "a": "x", "b": "x", "c": "x", "d": "x", "e": "x", "f": "x"}'
    result = build_evaluator("json_schema", {"schema": schema, "max_errors": 2}).evaluate(event(output))
    assert result.reason is not None
    assert result.reason.startswith("schema: $.a:")
    assert "and 5 more" in result.reason
    assert result.details == {"stage": "schema", "errors": 7}


def test_invalid_json_schema_is_a_build_error() -> None:
    with pytest.raises(ValidationError, match="invalid JSON Schema"):
        build_evaluator("json_schema", {"schema": {"type": "no-such-type"}})


@pytest.mark.parametrize(
    ("algorithm", "output", "expected", "score"),
    [
        ("levenshtein", "kitten", "sitting", 1 - 3 / 7),
        ("levenshtein", "", "", 1.0),
        ("levenshtein", "abc", "", 0.0),
        ("levenshtein", "北京大学", "北京大字", 0.75),
        ("jaccard", "the cat sat", "the cat ran", 2 / 4),
        ("jaccard", "The Cat", "the cat", 1.0),  # case-folded tokens
        ("jaccard", "北京是中国的首都", "中国的首都是北京", 1.0),  # per-character CJK tokens
        ("jaccard", "", "", 1.0),
        ("jaccard", "a", "", 0.0),
        ("cosine", "a a b", "a b b", 4 / 5),
        ("cosine", "", "", 1.0),
        ("cosine", "word", "", 0.0),
        ("cosine", "GPT-4 模型", "gpt 4 模型", 1.0),
        ("jaccard", "GPT-4是模型", "gpt 4 是 模 型", 1.0),  # CJK right after a word is split per character
    ],
)
def test_similarity_scores(algorithm: str, output: str, expected: str, score: float) -> None:
    result = build_evaluator("similarity", {"algorithm": algorithm}).evaluate(event(output, expected))
    assert result.score == pytest.approx(score, abs=1e-12)
    assert result.passed is (result.score >= 0.8)  # the evaluator-module spec: threshold default 0.8


def test_similarity_threshold_and_best_reference() -> None:
    ev = event("colour", None, references=["color", "colour"])
    result = build_evaluator("similarity", {"threshold": 0.99}).evaluate(ev)
    assert result.score == 1.0 and result.passed


def test_similarity_rejects_unknown_algorithm() -> None:
    with pytest.raises(ValidationError, match="levenshtein"):
        build_evaluator("similarity", {"algorithm": "levenstein"})


def test_unknown_evaluator_suggests_or_lists_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown evaluator 'exact'; did you mean 'exact_match'"):
        build_evaluator("exact")
    with pytest.raises(KeyError, match=r"valid evaluators: .*exact_match.*similarity"):
        build_evaluator("zzzz")


def test_unknown_params_are_rejected() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        build_evaluator("exact_match", {"ignore_case": True})


texts = st.text(alphabet=st.sampled_from("ab c北京的,.Z"), max_size=30)


@given(texts, texts)
def test_similarities_are_bounded_and_symmetric(a: str, b: str) -> None:
    for measure in (levenshtein, jaccard, cosine):
        value = measure(a, b)
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(measure(b, a), abs=1e-12)


@given(texts)
def test_identical_texts_are_fully_similar(a: str) -> None:
    for measure in (levenshtein, jaccard, cosine):
        assert measure(a, a) == pytest.approx(1.0)
