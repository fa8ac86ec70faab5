"""The report-quality spec's report metrics: the worked example, each part's formula, measuring from Markdown."""

from __future__ import annotations

from typing import Any

import pytest
from _support import event as request_event
from pydantic import ValidationError

from streameval.evaluators import build_evaluator
from streameval.evaluators.report import WORD_RANGES, word_count_score
from streameval.models import RequestEvent


def _event(output: str = "", **report: Any) -> RequestEvent:
    return request_event(id="r", output=output, report=report or None)


WORKED_EXAMPLE = {  # the report-quality spec's "完整评估案例": academic, 5/5 sections, 12 citations, 8,000 words, 6 sources, 2 images
    "style": "academic",
    "required_sections": list("ABCDE"),
    "sections": list("ABCDE"),
    "citations": 12,
    "word_count": 8000,
    "sources": [f"https://s{i}.example.org/x" for i in range(6)],
    "images": 2,
}


def test_seed_000_worked_example_is_9_67() -> None:
    score = build_evaluator("report_metrics").evaluate(_event(**WORKED_EXAMPLE))
    details = score.details or {}
    assert round(details["score_10"], 2) == 9.67
    assert details["parts"] == pytest.approx(
        {"sections": 10.0, "citations": 10.0, "word_count": 10.0, "sources": 10.0, "images": 20 / 3}
    )
    assert score.score == pytest.approx(details["score_10"] / 10)
    assert details["grade"] == "A+"  # 9.67 >= 9.0
    # the spec's final example combines it with the LLM's 8.45: 0.4 × 9.67 + 0.6 × 8.45 = 8.94 -> A
    assert round(0.4 * round(details["score_10"], 2) + 0.6 * 8.45, 2) == 8.94


@pytest.mark.parametrize(
    ("words", "style", "expected"),
    [
        (8000, "academic", 10.0),  # spec: in range
        (3000, "academic", 4.8),  # spec: 60 % -> 4.8
        (20000, "academic", 10 - (20000 / 15000 - 1) * 5),  # formula gives 8.33; the spec's example says 6.67
        (100000, "academic", 5.0),  # over: floor 5
        (0, "news", 0.0),
        (500, "social_media", 10.0),
        (1500, "social_media", 10.0),
        (1501, "social_media", 10 - (1501 / 1500 - 1) * 5),
        (9999, "strategic_investment", 9999 / 10000 * 8),
        (3000, "popular_science", 10.0),
    ],
)
def test_word_count_formula(words: int, style: str, expected: float) -> None:
    assert word_count_score(words, style) == pytest.approx(expected)


def test_five_styles_and_ranges() -> None:
    assert WORD_RANGES == {
        "academic": (5000, 15000),
        "strategic_investment": (10000, 20000),
        "popular_science": (3000, 8000),
        "news": (1000, 3000),
        "social_media": (500, 1500),
    }


@pytest.mark.parametrize(
    ("name", "report", "expected"),
    [
        ("report_citations", {"citations": 5}, 0.5),
        ("report_citations", {"citations": 15}, 1.0),
        ("report_citations", {"citations": 0}, 0.0),
        ("report_sources", {"sources": ["a", "b", "c"]}, 0.6),
        ("report_sources", {"sources": ["https://www.x.org/1", "https://x.org/2", "http://y.org"]}, 0.4),
        ("report_images", {"images": 1}, 1 / 3),
        ("report_images", {"images": 5}, 1.0),
        ("report_sections", {"required_sections": list("ABCDE"), "sections": list("ABCD")}, 0.8),
        ("report_sections", {"required_sections": list("ABCDE"), "sections": list("ABC")}, 0.6),
        ("report_word_count", {"style": "news", "word_count": 2000}, 1.0),
    ],
)
def test_parts_on_their_own(name: str, report: dict[str, Any], expected: float) -> None:
    score = build_evaluator(name).evaluate(_event(**report))
    assert score.score == pytest.approx(expected)
    assert (score.details or {})["score_10"] == pytest.approx(expected * 10)


MARKDOWN = """# Report title
## Key Points
Text with a [link](https://a.example.com/1) and [another](https://www.b.example.com/2), [again](https://a.example.com/3).
## Overview
![chart](img/chart.png) and <img src="x.png"> and a relative [doc](docs/x.md).
## Detailed Analysis
中文内容有八个字。
"""


def test_measures_markdown_when_the_block_is_absent() -> None:
    score = build_evaluator("report_metrics", {"style": "social_media"}).evaluate(_event(MARKDOWN))
    d = score.details or {}
    assert d["citations"] == 3 and d["sources"] == 2 and d["images"] == 2
    assert d["sections"] == "3/5" and d["missing_sections"] == ["Survey Note", "Key Citations"]
    assert d["style"] == "social_media"
    # words: every CJK character counts (8 of them), plus the Latin words
    assert d["word_count"] >= 8 + 20


def test_block_values_override_measurement_and_chinese_counts_characters() -> None:
    text = "研究" * 600  # 1,200 characters = 1,200 words
    d = build_evaluator("report_word_count").evaluate(_event(text, style="social_media")).details or {}
    assert d["word_count"] == 1200 and d["score_10"] == 10.0
    d = (
        build_evaluator("report_word_count")
        .evaluate(_event(text, style="social_media", word_count=10))
        .details
        or {}
    )
    assert d["word_count"] == 10


def test_custom_weights_and_bad_weights() -> None:
    only_images = build_evaluator("report_metrics", {"weights": {"images": 1.0}})
    assert only_images.evaluate(_event(**WORKED_EXAMPLE)).score == pytest.approx(2 / 3)
    with pytest.raises(ValidationError, match="unknown report part"):
        build_evaluator("report_metrics", {"weights": {"pictures": 1.0}})
    with pytest.raises(ValidationError, match="positive sum"):
        build_evaluator("report_metrics", {"weights": {"images": 0.0}})


@pytest.mark.parametrize(
    ("ten", "letter"), [(9.0, "A+"), (8.94, "A"), (8.0, "A-"), (5.0, "C-"), (4.0, "D"), (3.99, "F")]
)
def test_letter_grade_in_details(ten: float, letter: str) -> None:
    # only citations weigh: citations = ten -> score_10 = ten
    ev = build_evaluator("report_metrics", {"weights": {"citations": 1.0}, "citation_target": 1000})
    d = ev.evaluate(_event(citations=round(ten * 100))).details or {}
    assert d["score_10"] == pytest.approx(ten) and d["grade"] == letter
