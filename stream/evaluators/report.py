"""The report-quality spec's automated report metrics: ``report_metrics`` and each part on its own.

Five parts, each on 0-10 (the report-quality spec's "自动化指标评估"):

=================  ======  =================================================================
part               weight  score (0-10)
=================  ======  =================================================================
sections           30 %    required sections present / required × 10
citations          25 %    min(citations / 10, 1) × 10
word_count         20 %    10 inside the style's range; under: n / min × 8;
                           over: max(10 − (n / max − 1) × 5, 5)
sources            15 %    min(unique sources / 5, 1) × 10
images             10 %    min(images / 3, 1) × 10
=================  ======  =================================================================

``report_metrics`` = Σ weight × part (0-10), graded with the report-quality spec's letters (A+ >= 9.0 ... F <
4.0). An evaluator's score must be 0-1, so ``Score.score`` is the 0-10 figure / 10 and ``details`` carry
``score_10`` and ``grade``. The report-quality spec's worked example (5/5 sections, 12 citations, 8,000 words
academic, 6 sources, 2 images) gives 9.67 (tests/evaluators/test_metrics_report.py).

Facts come from the event's ``report`` block when given, else they are measured from ``output`` as
Markdown: sections = headings (a required section is present when a heading contains its name, case
folded); citations = links to http(s) URLs (images excluded); sources = distinct hosts of those URLs
(``www.`` dropped); images = ``![..](..)`` and ``<img>``; words = word tokens with every CJK character
counted as a word (the report-quality spec: Chinese text counts characters).

Spec ambiguity: the spec's word-count example says 20,000 words (academic, 33 % over) scores 6.67, but
its formula gives 10 − 0.333 × 5 = 8.33. We follow the formula (the code the spec quotes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urlsplit

import regex
from pydantic import Field, field_validator

from ..blocks import ReportStyle
from ..grading import grade
from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register
from ._lang import cjk_tokens

__all__ = [
    "PARTS",
    "WORD_RANGES",
    "ReportFacts",
    "ReportMetrics",
    "measure_report",
    "part_scores",
    "word_count_score",
]

#: the report-quality spec: word-count range per report style
WORD_RANGES: dict[str, tuple[int, int]] = {
    "academic": (5_000, 15_000),
    "strategic_investment": (10_000, 20_000),
    "popular_science": (3_000, 8_000),
    "news": (1_000, 3_000),
    "social_media": (500, 1_500),
}
#: the report-quality spec: part weights (sum 1)
PARTS: dict[str, float] = {
    "sections": 0.30,
    "citations": 0.25,
    "word_count": 0.20,
    "sources": 0.15,
    "images": 0.10,
}
# DeerFlow's report template sections; five, as in the spec's "5/5" example.
DEFAULT_SECTIONS = ("Key Points", "Overview", "Detailed Analysis", "Survey Note", "Key Citations")

_HEADING = regex.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", regex.MULTILINE)
_LINK = regex.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?(https?://[^)\s>]+)")
_IMAGE = regex.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|<img\b", regex.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ReportFacts:
    style: str
    required: tuple[str, ...]
    present: tuple[str, ...]
    word_count: int
    citations: int
    sources: int
    images: int


def _source_key(source: str) -> str:
    host = urlsplit(source).hostname if "://" in source else None
    key = (host or source).casefold().strip()
    return key.removeprefix("www.")


class ReportPartParams(Params):
    style: ReportStyle = Field(
        default="academic", description="style used when the event's report block has none"
    )
    required_sections: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SECTIONS), description="used when the report block has none"
    )
    citation_target: int = Field(default=10, ge=1, description="citations for full marks (default: 10)")
    source_target: int = Field(default=5, ge=1, description="unique sources for full marks (default: 5)")
    image_target: int = Field(default=3, ge=1, description="images for full marks (default: 3)")
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this score (0-1)")


def measure_report(event: RequestEvent, params: ReportPartParams) -> ReportFacts:
    """The report's facts: the ``report`` block's values, the rest measured from ``output``."""
    block = event.report
    text = event.output
    urls: list[str] | None = None

    def cited_urls() -> list[str]:
        nonlocal urls
        if urls is None:
            urls = _LINK.findall(text)
        return urls

    required = tuple(
        block.required_sections if block and block.required_sections is not None else params.required_sections
    )
    if block and block.sections is not None:
        present_names = [s.casefold() for s in block.sections]
    else:
        present_names = [h.casefold() for h in _HEADING.findall(text)]
    present = tuple(r for r in required if any(r.casefold() in name for name in present_names))
    sources = block.sources if block and block.sources is not None else cited_urls()
    return ReportFacts(
        style=(block.style if block and block.style else None) or params.style,
        required=required,
        present=present,
        word_count=block.word_count if block and block.word_count is not None else len(cjk_tokens(text)),
        citations=block.citations if block and block.citations is not None else len(cited_urls()),
        sources=len({_source_key(s) for s in sources if s.strip()}),
        images=block.images if block and block.images is not None else len(_IMAGE.findall(text)),
    )


def word_count_score(words: int, style: str) -> float:
    """The report-quality spec's word-count compliance on 0-10 for ``style``."""
    low, high = WORD_RANGES[style]
    if low <= words <= high:
        return 10.0
    if words < low:
        return words / low * 8  # under: at most 8
    return max(10 - (words / high - 1) * 5, 5.0)  # over: at least 5


def part_scores(facts: ReportFacts, params: ReportPartParams) -> dict[str, float]:
    """Each part on 0-10 (no rounding)."""
    return {
        "sections": len(facts.present) / len(facts.required) * 10 if facts.required else 10.0,
        "citations": min(facts.citations / params.citation_target, 1.0) * 10,
        "word_count": word_count_score(facts.word_count, facts.style),
        "sources": min(facts.sources / params.source_target, 1.0) * 10,
        "images": min(facts.images / params.image_target, 1.0) * 10,
    }


def _facts_details(facts: ReportFacts) -> dict[str, object]:
    return {
        "style": facts.style,
        "word_count": facts.word_count,
        "citations": facts.citations,
        "sources": facts.sources,
        "images": facts.images,
        "sections": f"{len(facts.present)}/{len(facts.required)}",
        "missing_sections": [s for s in facts.required if s not in facts.present],
    }


class ReportParams(ReportPartParams):
    weights: dict[str, float] = Field(
        default_factory=lambda: dict(PARTS), description="part weights (default: 30/25/20/15/10 %)"
    )

    @field_validator("weights")
    @classmethod
    def _known_parts(cls, weights: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(weights) - set(PARTS))
        if unknown:
            raise ValueError(f"unknown report part(s) {', '.join(unknown)}; parts: {', '.join(PARTS)}")
        if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        return weights


@register
class ReportMetrics(Evaluator):
    """The report-quality spec's automated metrics: weighted parts on 0-10, letter grade; score = 0-10 figure / 10."""

    name = "report_metrics"
    summary = "report metrics (sections, citations, words, sources, images), 0-10 and letter grade"
    Params = ReportParams
    params: ReportParams

    def evaluate(self, event: RequestEvent) -> Score:
        facts = measure_report(event, self.params)
        parts = part_scores(facts, self.params)
        weights = {p: self.params.weights.get(p, 0.0) for p in PARTS}
        ten = sum(parts[p] * w for p, w in weights.items()) / sum(weights.values())
        score = ten / 10
        letter = grade(score, "letters")
        details = {"score_10": ten, "grade": letter, "parts": parts, **_facts_details(facts)}
        return Score(
            score, score >= self.params.threshold, f"report metrics {ten:.2f}/10, grade {letter}", details
        )


class _ReportPart(Evaluator):
    """One part of the report-quality spec's metrics on its own: score = part (0-10) / 10."""

    part: ClassVar[str]
    Params = ReportPartParams
    params: ReportPartParams

    def evaluate(self, event: RequestEvent) -> Score:
        facts = measure_report(event, self.params)
        ten = part_scores(facts, self.params)[self.part]
        details = {"score_10": ten, **_facts_details(facts)}
        return Score(ten / 10, ten / 10 >= self.params.threshold, f"{self.part} {ten:.2f}/10", details)


@register
class ReportSections(_ReportPart):
    name = "report_sections"
    summary = "section coverage: required sections present"
    part = "sections"


@register
class ReportCitations(_ReportPart):
    name = "report_citations"
    summary = "citations: min(n / 10, 1)"
    part = "citations"


@register
class ReportWordCount(_ReportPart):
    name = "report_word_count"
    summary = "word-count compliance for the report style"
    part = "word_count"


@register
class ReportSources(_ReportPart):
    name = "report_sources"
    summary = "source diversity: min(unique sources / 5, 1)"
    part = "sources"


@register
class ReportImages(_ReportPart):
    name = "report_images"
    summary = "images: min(n / 3, 1)"
    part = "images"
