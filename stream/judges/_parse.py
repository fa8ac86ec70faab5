"""Response parser (seed 003 ``ResponseParser``) with its fallbacks, validation and normalisation.

Rubric answers are read by the first stage that works, and the stage is recorded as ``parse``:

1. ``json``           the whole answer is a JSON object
2. ``fenced_json``    a JSON object inside a Markdown code fence (```json ... ```)
3. ``embedded_json``  seed 003's ``re.search(r'\\{[\\s\\S]*\\}')``: first ``{`` to last ``}``
4. ``regex``          seed 003 ``_extract_scores_from_text``: ``<criterion>.*?<number>`` per criterion,
                      clamped to the scale
5. ``default``        nothing found: every criterion gets the scale's midpoint (seed 003: 3.0 on 1-5;
                      5.0 on 0-10 by the same rule)

Criteria missing from an otherwise readable answer get the midpoint too and are listed in
``defaulted``. Validation (seed 003 ``validate_evaluation``): a JSON criterion or overall score
outside the scale makes the answer unusable (:class:`JudgeBadResponse`); missing ``scores``,
``overall_score`` or ``reasoning`` and an overall more than 0.5 away from the weighted criteria are
warnings. Scores are normalised to 0-10: 1-5 by (s - 1) / 4 x 10 (seed 003), 0-1 by x 10.
Seed 002 single-number answers take the first number, clamped to [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import regex  # type: ignore[import-untyped]

from .._util import clip
from ._errors import JudgeBadResponse
from ._prompts import Prompt

__all__ = ["SCALES", "Verdict", "normalise", "parse_answer"]

#: scale -> (low, high, default): seed 003's default is 3.0 on 1-5, i.e. the midpoint
SCALES: dict[str, tuple[float, float, float]] = {"1-5": (1.0, 5.0, 3.0), "0-10": (0.0, 10.0, 5.0), "0-1": (0.0, 1.0, 0.5)}
#: seed 003: "abs(overall - calculated) > 0.5" on the judge's own scale
OVERALL_TOLERANCE = 0.5
_REGEX_TIMEOUT_S = 0.1  # judge answers are untrusted text; regex (unlike re) can be interrupted
_FENCE = regex.compile(r"```(?:json|JSON)?\s*(\{.*?\})\s*```", regex.DOTALL)
_BRACES = regex.compile(r"\{[\s\S]*\}")
_NUMBER = regex.compile(r"(?<![\d.])(-?\d+(?:\.\d+)?)")


@dataclass
class Verdict:
    """One judge's parsed answer. ``score`` is on 0-10; the others on the judge's ``scale``."""

    score: float
    scale: str
    parse: str
    scores: dict[str, float] = field(default_factory=dict)
    overall: float | None = None
    computed: float | None = None
    reasoning: str | None = None
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def normalise(value: float, scale: str) -> float:
    """A score on ``scale`` as 0-10 (seed 003: (s - 1) / 4 x 10 for 1-5)."""
    if scale == "1-5":
        return (value - 1.0) / 4.0 * 10.0
    if scale == "0-1":
        return value * 10.0
    return value


def parse_answer(text: str, prompt: Prompt) -> Verdict:
    """Parse a judge's answer to ``prompt``. Raises :class:`JudgeBadResponse` when it is unusable."""
    if prompt.scale == "0-1":
        return _parse_number(text)
    for stage, candidate in _json_candidates(text):
        try:
            document = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        if isinstance(document, dict) and ("scores" in document or "overall_score" in document):
            return _from_json(document, stage, prompt)
    return _from_text(text, prompt)


def _json_candidates(text: str) -> Iterator[tuple[str, str]]:
    """The stages in order, each computed only when the previous one did not parse (most answers are
    plain JSON: the regex searches were ~5 % of a worker's CPU at 1,500 judge calls/s)."""
    yield "json", text.strip()
    try:
        fence = _FENCE.search(text, timeout=_REGEX_TIMEOUT_S)
        braces = _BRACES.search(text, timeout=_REGEX_TIMEOUT_S)
    except TimeoutError:
        return
    if fence:
        yield "fenced_json", fence.group(1)
    if braces:
        yield "embedded_json", braces.group(0)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, dict):
        value = value.get("score")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [clip(str(item), 500) for item in items[:10]]


def _from_json(doc: dict[str, Any], stage: str, prompt: Prompt) -> Verdict:
    low, high, default = SCALES[prompt.scale]
    warnings = [f"missing field: {name}" for name in ("scores", "overall_score", "reasoning") if name not in doc]
    raw = doc.get("scores")
    raw_scores: dict[str, Any] = raw if isinstance(raw, dict) else {}
    scores: dict[str, float] = {}
    defaulted: list[str] = []
    for criterion in prompt.weights:
        value = _number(raw_scores.get(criterion))
        if value is None:
            scores[criterion] = default
            defaulted.append(criterion)
        elif not low <= value <= high:
            raise JudgeBadResponse(f"criterion {criterion} scored {value:g}, outside the {prompt.scale} scale")
        else:
            scores[criterion] = value
    overall = _number(doc.get("overall_score"))
    if overall is not None and not low <= overall <= high:
        raise JudgeBadResponse(f"overall_score {overall:g} is outside the {prompt.scale} scale")
    reasoning = doc.get("reasoning")
    verdict = Verdict(0.0, prompt.scale, stage, scores, overall, reasoning=clip(str(reasoning)) if reasoning else None,
                      strengths=_texts(doc.get("strengths")), weaknesses=_texts(doc.get("weaknesses")),
                      defaulted=defaulted, warnings=warnings)  # fmt: skip
    return _finish(verdict, prompt, given=len(defaulted) < len(prompt.weights))


def _from_text(text: str, prompt: Prompt) -> Verdict:
    low, high, default = SCALES[prompt.scale]
    scores: dict[str, float] = {}
    defaulted: list[str] = []
    for criterion in prompt.weights:
        found = _find_after(criterion, text)
        if found is None:
            scores[criterion] = default
            defaulted.append(criterion)
        else:
            scores[criterion] = min(high, max(low, found))  # seed 003: max(1.0, min(5.0, score))
    overall = _find_after(r"overall[\s_-]*score", text)
    overall = None if overall is None else min(high, max(low, overall))
    stage = "regex" if len(defaulted) < len(prompt.weights) or overall is not None else "default"
    verdict = Verdict(0.0, prompt.scale, stage, scores, overall, reasoning=clip(text.strip(), 500) or None,
                      defaulted=defaulted)  # fmt: skip
    return _finish(verdict, prompt, given=len(defaulted) < len(prompt.weights))


def _find_after(label: str, text: str) -> float | None:
    # seed 003: rf'{criterion}.*?(\d+(?:\.\d+)?)' with re.IGNORECASE (and no DOTALL: same line)
    try:
        match = regex.search(rf"{label}.*?(\d+(?:\.\d+)?)", text, regex.IGNORECASE, timeout=_REGEX_TIMEOUT_S)
    except TimeoutError:
        return None
    return float(match.group(1)) if match else None


def _finish(verdict: Verdict, prompt: Prompt, *, given: bool) -> Verdict:
    """Pick the judge's score, check overall against the weighted criteria, normalise to 0-10."""
    total = math.fsum(prompt.weights.values())
    computed = math.fsum(verdict.scores[c] * w for c, w in prompt.weights.items()) / total
    verdict.computed = round(computed, 6)
    if verdict.overall is not None and given and abs(verdict.overall - computed) > OVERALL_TOLERANCE:
        verdict.warnings.append(
            f"overall_score {verdict.overall:g} differs from the weighted criteria {computed:.2f} by more than 0.5"
        )
    # seed 003: 1-5 judges' score is the weighted criteria; the 0-10 judge's is its overall_score
    if prompt.kind == "overall" or not given:
        raw = verdict.overall if verdict.overall is not None else computed
    else:
        raw = computed
    if verdict.defaulted:
        verdict.warnings.append(f"defaulted to {SCALES[prompt.scale][2]:g}: {', '.join(verdict.defaulted)}")
    verdict.score = round(normalise(raw, prompt.scale), 6)
    return verdict


def _parse_number(text: str) -> Verdict:
    try:
        match = _NUMBER.search(text, timeout=_REGEX_TIMEOUT_S)
    except TimeoutError:
        match = None
    if match is None:
        raise JudgeBadResponse("the answer holds no number")
    value = float(match.group(1))
    clamped = min(1.0, max(0.0, value))  # seed 002: "确保分数在0-1范围内"
    warnings = [] if clamped == value else [f"clamped {value:g} to {clamped:g}"]
    return Verdict(round(clamped * 10.0, 6), "0-1", "number", overall=clamped, warnings=warnings,
                   reasoning=clip(text.strip(), 500) or None)  # fmt: skip
