"""Response parser: the multi-judge spec's fallbacks (each recorded), validation and normalisation."""

from __future__ import annotations

import orjson
import pytest
from _judges_helpers import event
from hypothesis import given
from hypothesis import strategies as st

from streameval.judges import (
    JudgeBadResponse,
    build_metric,
    build_report,
    build_rubric,
    normalise,
    parse_answer,
)

STANDARD = build_rubric(event(), "qa_simple", "1-5", blind=True)  # accuracy .4, conciseness .3, clarity .3
OVERALL = build_rubric(event(), "qa_simple", "0-10", blind=True)
GOOD = {
    "scores": {
        "accuracy": {"score": 4.5, "justification": "ok"},
        "conciseness": {"score": 4, "justification": "ok"},
        "clarity": 4.5,
    },
    "overall_score": 4.35,
    "strengths": ["a", "b"],
    "weaknesses": ["c"],
    "reasoning": "fine",
}
GOOD_TEXT = orjson.dumps(GOOD).decode()


@pytest.mark.parametrize(
    ("text", "stage", "score", "defaulted"),
    [
        (GOOD_TEXT, "json", 8.375, []),  # the multi-judge spec's example: 4.35 -> (4.35-1)/4*10 = 8.375
        (f"Sure! Here it is:\n```json\n{GOOD_TEXT}\n```\nThanks.", "fenced_json", 8.375, []),
        (f"My evaluation: {GOOD_TEXT} -- end", "embedded_json", 8.375, []),
        ("accuracy: 4.5\nconciseness - 4 points\nClarity 4.5/5\noverall score 4.35", "regex", 8.375, []),
        (
            '{"scores": {"accuracy": {"score": 5',
            "regex",
            (5 * 0.4 + 3 * 0.3 + 3 * 0.3 - 1) / 4 * 10,
            ["conciseness", "clarity"],
        ),
        ("I refuse to grade this.", "default", 5.0, ["accuracy", "conciseness", "clarity"]),
        (
            '{"scores": {"accuracy": 5}, "overall_score": 5, "reasoning": "r"}',
            "json",
            (5 * 0.4 + 3 * 0.6 - 1) / 4 * 10,
            ["conciseness", "clarity"],
        ),
    ],
)
def test_fallback_stages(text: str, stage: str, score: float, defaulted: list[str]) -> None:
    verdict = parse_answer(text, STANDARD)
    assert verdict.parse == stage
    assert verdict.score == pytest.approx(score, abs=1e-6)
    assert verdict.defaulted == defaulted
    assert bool(defaulted) == any("defaulted to 3" in w for w in verdict.warnings)


def test_json_answer_keeps_strengths_weaknesses_reasoning() -> None:
    verdict = parse_answer(GOOD_TEXT, STANDARD)
    assert (verdict.strengths, verdict.weaknesses, verdict.reasoning) == (["a", "b"], ["c"], "fine")
    assert verdict.scores == {"accuracy": 4.5, "conciseness": 4.0, "clarity": 4.5} and verdict.warnings == []


def test_regex_clamps_to_the_scale_like_seed_003() -> None:
    verdict = parse_answer("accuracy 9\nconciseness 0\nclarity 3", STANDARD)
    assert verdict.scores == {"accuracy": 5.0, "conciseness": 1.0, "clarity": 3.0}


@pytest.mark.parametrize(
    "doc",
    [
        {"scores": {"accuracy": 7, "conciseness": 4, "clarity": 4}, "overall_score": 4, "reasoning": "r"},
        {"scores": {"accuracy": 4, "conciseness": 0, "clarity": 4}, "overall_score": 4, "reasoning": "r"},
        {"scores": {"accuracy": 4, "conciseness": 4, "clarity": 4}, "overall_score": 6, "reasoning": "r"},
    ],
)
def test_out_of_range_json_scores_are_unusable(doc: dict[str, object]) -> None:
    with pytest.raises(JudgeBadResponse, match="outside the 1-5 scale"):
        parse_answer(orjson.dumps(doc).decode(), STANDARD)


@pytest.mark.parametrize(
    ("doc", "warning"),
    [
        (
            {"scores": {"accuracy": 4, "conciseness": 4, "clarity": 4}, "overall_score": 4},
            "missing field: reasoning",
        ),
        (
            {"scores": {"accuracy": 4, "conciseness": 4, "clarity": 4}, "reasoning": "r"},
            "missing field: overall_score",
        ),
        ({"overall_score": 4, "reasoning": "r"}, "missing field: scores"),
        (
            {
                "scores": {"accuracy": 5, "conciseness": 5, "clarity": 5},
                "overall_score": 4.4,
                "reasoning": "r",
            },
            "differs from the weighted criteria 5.00 by more than 0.5",
        ),
    ],
)
def test_validation_warnings(doc: dict[str, object], warning: str) -> None:
    verdict = parse_answer(orjson.dumps(doc).decode(), STANDARD)
    assert any(warning in w for w in verdict.warnings), verdict.warnings


def test_overall_within_half_a_point_is_not_flagged() -> None:
    doc = {"scores": {"accuracy": 5, "conciseness": 5, "clarity": 5}, "overall_score": 4.5, "reasoning": "r"}
    assert parse_answer(orjson.dumps(doc).decode(), STANDARD).warnings == []


def test_zero_to_ten_judge_score_is_its_overall() -> None:
    doc = {"scores": {"accuracy": 9, "conciseness": 8, "clarity": 8}, "overall_score": 8.5, "reasoning": "r"}
    verdict = parse_answer(orjson.dumps(doc).decode(), OVERALL)
    assert verdict.score == 8.5 and verdict.computed == pytest.approx(
        8.4
    )  # the multi-judge spec: MiniMax returns 0-10


def test_report_score_is_seed_000_weighted_dimensions() -> None:
    doc = {
        "scores": {
            "relevance": 9,
            "depth": 8,
            "accuracy": 9,
            "structure": 8,
            "clarity": 9,
            "completeness": 7,
        },
        "overall_score": 8.5,
        "strengths": ["s"] * 3,
        "weaknesses": ["w"] * 3,
        "reasoning": "r",
    }
    verdict = parse_answer(orjson.dumps(doc).decode(), build_report(event(), blind=True))
    assert verdict.score == pytest.approx(8.45)  # the report-quality spec's worked example


@pytest.mark.parametrize(
    ("text", "score", "warned"),
    [
        ("0.85", 8.5, False),
        ("Score: 0.4\n", 4.0, False),
        ("1", 10.0, False),
        ("7", 10.0, True),
        ("-0.2", 0.0, True),
    ],
)
def test_single_number_answers(text: str, score: float, warned: bool) -> None:
    verdict = parse_answer(text, build_metric(event(), "equivalence", blind=True))
    assert (
        verdict.parse == "number"
        and verdict.score == pytest.approx(score)
        and bool(verdict.warnings) is warned
    )


def test_single_number_without_a_number_is_unusable() -> None:
    with pytest.raises(JudgeBadResponse):
        parse_answer("no idea", build_metric(event(), "equivalence", blind=True))


@pytest.mark.parametrize(
    ("value", "scale", "ten"),
    [
        (1, "1-5", 0),
        (5, "1-5", 10),
        (4.35, "1-5", 8.375),
        (3, "1-5", 5),
        (7.5, "0-10", 7.5),
        (0.42, "0-1", 4.2),
    ],
)
def test_normalise(value: float, scale: str, ten: float) -> None:
    assert normalise(value, scale) == pytest.approx(ten)


@given(st.text(max_size=400))
def test_any_text_parses_to_a_score_in_range_or_is_rejected(text: str) -> None:
    try:
        verdict = parse_answer(text, STANDARD)
    except JudgeBadResponse:
        return
    assert 0.0 <= verdict.score <= 10.0
    assert verdict.parse in {"json", "fenced_json", "embedded_json", "regex", "default"}
