"""Response parser (the multi-judge spec's ``ResponseParser``) with its fallbacks, validation and normalisation.

Rubric answers are read by the first stage that works, and the stage is recorded as ``parse``:

1. ``json``           the whole answer is a JSON object
2. ``fenced_json``    a JSON object inside a Markdown code fence (```json ... ```)
3. ``embedded_json``  a complete JSON object anywhere in the answer (the multi-judge spec took the
                      first ``{`` to the last ``}``, which spans JSON the judge quotes as well as its own)
4. ``regex``          the multi-judge spec's ``_extract_scores_from_text``: ``<criterion>.*?<number>``
                      per criterion, clamped to the scale
5. ``default``        nothing found: every criterion gets the scale's midpoint (the multi-judge
                      spec: 3.0 on 1-5; 5.0 on 0-10 by the same rule)

The judge's own answer, not what it quotes: the evaluated output may carry verdict-shaped JSON or
"return 5" instructions, and a judge often quotes the material it grades. So (stages 2-4):

* every complete JSON object of the answer is found (``json.JSONDecoder.raw_decode`` at each ``{``,
  at most ``_MAX_OBJECT_STARTS`` tries of ``_MAX_OBJECT_CHARS``); an object with ``scores`` or
  ``overall_score`` is a verdict;
* a verdict that is also in the evaluated material (the event's output, input, references: equal as
  JSON, or the same text up to whitespace) is a quote, never the judge's verdict; so is a whole-answer
  verdict that repeats one (the judge obeyed the output);
* of the remaining verdicts the last is used when they all agree; verdicts that disagree give the
  ``default`` stage with a warning (the answer is ambiguous, nothing in it can be trusted);
* the regex stage reads the answer without its JSON objects and without lines quoted verbatim from
  the material, and a criterion given two different numbers is a conflict (``default`` too).

Criteria missing from an otherwise readable answer get the midpoint too and are listed in
``defaulted``. Validation (the multi-judge spec's ``validate_evaluation``): a JSON criterion or overall score
outside the scale makes the answer unusable (:class:`JudgeBadResponse`); missing ``scores``,
``overall_score`` or ``reasoning`` and an overall more than 0.5 away from the weighted criteria are
warnings. Scores are normalised to 0-10: 1-5 by (s - 1) / 4 x 10 (the multi-judge spec), 0-1 by x 10.
The RAG-evaluation spec's single-number answers take the first number not on a line quoted from the material,
clamped to [0, 1].
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson
import regex

from .._util import clip
from ._errors import JudgeBadResponse
from ._prompts import DATA_CLOSE, DATA_OPEN, Prompt

__all__ = ["SCALES", "ParsedAnswer", "normalise", "parse_answer"]

#: scale -> (low, high, default): the multi-judge spec's default is 3.0 on 1-5, i.e. the midpoint
SCALES: dict[str, tuple[float, float, float]] = {
    "1-5": (1.0, 5.0, 3.0),
    "0-10": (0.0, 10.0, 5.0),
    "0-1": (0.0, 1.0, 0.5),
}
#: the multi-judge spec: "abs(overall - calculated) > 0.5" on the judge's own scale
OVERALL_TOLERANCE = 0.5
_REGEX_TIMEOUT_S = 0.1  # judge answers are untrusted text; regex (unlike re) can be interrupted
_FENCE = regex.compile(r"```[^\n`]*\n?(.*?)```", regex.DOTALL)
_NUMBER = regex.compile(r"(?<![\d.])(-?\d+(?:\.\d+)?)")
# Bounds on untrusted text (the material is up to an event's size, 1 MiB): raw_decode is tried at most
# this often per text, on at most this many characters (a verdict is a few hundred), and at most this
# many answer lines are looked up in the material.
_MAX_OBJECT_STARTS = 256
_MAX_OBJECT_CHARS = 32_768
_MATERIAL_OBJECT_STARTS, _MATERIAL_OBJECT_CHARS = 64, 8192  # a verdict to inject is small
_MAX_QUOTED_LINES = 64
_QUOTED_LINE = 16  # an answer line this long found verbatim in the material is a quote
_DECODER = json.JSONDecoder()


@dataclass
class ParsedAnswer:
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
    """A score on ``scale`` as 0-10 (the multi-judge spec: (s - 1) / 4 x 10 for 1-5)."""
    if scale == "1-5":
        return (value - 1.0) / 4.0 * 10.0
    if scale == "0-1":
        return value * 10.0
    return value


def parse_answer(text: str, prompt: Prompt) -> ParsedAnswer:
    """Parse a judge's answer to ``prompt``. Raises :class:`JudgeBadResponse` when it is unusable."""
    material = _Material(prompt)
    if prompt.scale == "0-1":
        return _parse_number(material.unquoted_lines(text))
    whole = text.strip()
    if whole.startswith("{"):  # most answers: one JSON object and nothing else
        try:
            document = orjson.loads(whole)
        except orjson.JSONDecodeError:
            document = None
        if _is_verdict(document) and not material.quotes(document, whole):
            return _from_json(document, "json", prompt)
    objects = _objects(text)
    own = [
        (start, end, doc)
        for start, end, doc in objects
        if _is_verdict(doc) and not material.quotes(doc, text[start:end])
    ]
    if own:
        if len({_key(doc, prompt) for _, _, doc in own}) > 1:
            return _conflict(
                text, prompt, f"the answer holds {len(own)} verdicts that disagree; none is used"
            )
        start, end, doc = own[-1]
        return _from_json(doc, _stage(text, start, end), prompt)
    return _from_text(_prose(text, objects, material), prompt)


class _Material:
    """The evaluated material of a prompt (the strings of its data block), to tell quotes from verdicts."""

    def __init__(self, prompt: Prompt) -> None:
        self.user = prompt.user

    @cached_property
    def texts(self) -> list[str]:
        _, _, rest = self.user.partition(DATA_OPEN)
        block, _, _ = rest.rpartition(DATA_CLOSE)
        try:
            data = orjson.loads(block) if rest else None
        except orjson.JSONDecodeError:
            data = None
        return _strings(data) if data is not None else [self.user]

    @cached_property
    def squashed(self) -> str:
        return "\n".join("".join(t.split()) for t in self.texts)

    @cached_property
    def verdicts(self) -> list[Any]:
        return [
            doc
            for t in self.texts
            if "{" in t
            for _, _, doc in _objects(t, tries=_MATERIAL_OBJECT_STARTS, chars=_MATERIAL_OBJECT_CHARS)
            if _is_verdict(doc)
        ]

    def quotes(self, document: Any, text: str) -> bool:
        """True when the verdict ``document`` (written as ``text``) is in the material: a quote."""
        if "scores" not in self.user and "overall_score" not in self.user:
            return False  # the common case: nothing verdict-shaped to quote
        return document in self.verdicts or self.contains(text)

    def contains(self, text: str) -> bool:
        """True when ``text`` is in the material, whitespace aside."""
        return "".join(text.split()) in self.squashed

    def unquoted_lines(self, text: str) -> str:
        """``text`` without its lines that are verbatim in the material (a judge quoting the output)."""
        lines = text.splitlines()
        long = [i for i, ln in enumerate(lines) if len(ln.strip()) >= _QUOTED_LINE][:_MAX_QUOTED_LINES]
        quoted = {i for i in long if any(lines[i].strip() in t for t in self.texts)}
        return "\n".join(ln for i, ln in enumerate(lines) if i not in quoted) if quoted else text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _objects(
    text: str, *, tries: int = _MAX_OBJECT_STARTS, chars: int = _MAX_OBJECT_CHARS
) -> list[tuple[int, int, Any]]:
    """Each complete top-level JSON object in ``text`` (of at most ``chars``, found in at most
    ``tries``): (start, end, document), in order."""
    found: list[tuple[int, int, Any]] = []
    position = 0
    while tries > 0 and (start := text.find("{", position)) != -1:
        tries -= 1
        try:
            if len(text) - start <= chars:
                document, end = _DECODER.raw_decode(text, start)
            else:
                document, end = _DECODER.raw_decode(text[start : start + chars])
                end += start
        except (ValueError, RecursionError):
            position = start + 1
            continue
        found.append((start, end, document))
        position = end
    return found


def _is_verdict(document: Any) -> bool:
    return isinstance(document, dict) and ("scores" in document or "overall_score" in document)


def _key(document: dict[str, Any], prompt: Prompt) -> tuple[float | None, ...]:
    raw = document.get("scores")
    scores: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return (*(_number(scores.get(c)) for c in prompt.weights), _number(document.get("overall_score")))


def _stage(text: str, start: int, end: int) -> str:
    if not text[:start].strip() and not text[end:].strip():
        return "json"
    try:
        fences = [m.span(1) for m in _FENCE.finditer(text, timeout=_REGEX_TIMEOUT_S)]
    except TimeoutError:
        fences = []
    return "fenced_json" if any(a <= start and end <= b for a, b in fences) else "embedded_json"


def _prose(text: str, objects: list[tuple[int, int, Any]], material: _Material) -> str:
    """The answer without the JSON objects and the lines it quotes from the material."""
    quoted = [(start, end) for start, end, _ in objects if material.contains(text[start:end])]
    if quoted:
        parts, position = [], 0
        for start, end in quoted:
            parts.append(text[position:start])
            position = end
        parts.append(text[position:])
        text = " ".join(parts)
    return material.unquoted_lines(text)


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


def _from_json(doc: dict[str, Any], stage: str, prompt: Prompt) -> ParsedAnswer:
    low, high, default = SCALES[prompt.scale]
    warnings = [
        f"missing field: {name}" for name in ("scores", "overall_score", "reasoning") if name not in doc
    ]
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
            raise JudgeBadResponse(
                f"criterion {criterion} scored {value:g}, outside the {prompt.scale} scale"
            )
        else:
            scores[criterion] = value
    overall = _number(doc.get("overall_score"))
    if overall is not None and not low <= overall <= high:
        raise JudgeBadResponse(f"overall_score {overall:g} is outside the {prompt.scale} scale")
    reasoning = doc.get("reasoning")
    verdict = ParsedAnswer(
        0.0,
        prompt.scale,
        stage,
        scores,
        overall,
        reasoning=clip(str(reasoning)) if reasoning else None,
        strengths=_texts(doc.get("strengths")),
        weaknesses=_texts(doc.get("weaknesses")),
        defaulted=defaulted,
        warnings=warnings,
    )
    return _finish(verdict, prompt, given=len(defaulted) < len(prompt.weights))


def _from_text(text: str, prompt: Prompt) -> ParsedAnswer:
    low, high, default = SCALES[prompt.scale]
    scores: dict[str, float] = {}
    defaulted: list[str] = []
    for criterion in prompt.weights:
        found = _find_after(criterion, text, low, high)
        if found is None:
            scores[criterion] = default
            defaulted.append(criterion)
        elif isinstance(found, set):
            return _conflict(
                text, prompt, f"{criterion} is given several scores ({_listed(found)}); none is used"
            )
        else:
            scores[criterion] = found
    overall = _find_after(r"overall[\s_-]*score", text, low, high)
    if isinstance(overall, set):
        return _conflict(
            text, prompt, f"overall score is given several values ({_listed(overall)}); none is used"
        )
    stage = "regex" if len(defaulted) < len(prompt.weights) or overall is not None else "default"
    verdict = ParsedAnswer(
        0.0,
        prompt.scale,
        stage,
        scores,
        overall,
        reasoning=clip(text.strip(), 500) or None,
        defaulted=defaulted,
    )
    return _finish(verdict, prompt, given=len(defaulted) < len(prompt.weights))


def _find_after(label: str, text: str, low: float, high: float) -> float | set[float] | None:
    """The number after ``label`` (clamped to the scale), or the set of them when they differ."""
    # the multi-judge spec: rf'{criterion}.*?(\d+(?:\.\d+)?)' with re.IGNORECASE (and no DOTALL: same line);
    # every match, not the first: a label given two different numbers is a conflict
    try:
        matches = regex.finditer(
            rf"{label}.*?(\d+(?:\.\d+)?)", text, regex.IGNORECASE, timeout=_REGEX_TIMEOUT_S
        )
        found = {
            min(high, max(low, float(m.group(1)))) for m in matches
        }  # the multi-judge spec: max(1.0, min(5.0, score))
    except TimeoutError:
        return None
    if not found:
        return None
    return found.pop() if len(found) == 1 else found


def _listed(values: set[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


def _conflict(text: str, prompt: Prompt, why: str) -> ParsedAnswer:
    """The ``default`` verdict of an answer that holds several conflicting verdicts."""
    default = SCALES[prompt.scale][2]
    verdict = ParsedAnswer(
        0.0,
        prompt.scale,
        "default",
        dict.fromkeys(prompt.weights, default),
        reasoning=clip(text.strip(), 500) or None,
        defaulted=list(prompt.weights),
        warnings=[why],
    )
    return _finish(verdict, prompt, given=False)


def _finish(verdict: ParsedAnswer, prompt: Prompt, *, given: bool) -> ParsedAnswer:
    """Pick the judge's score, check overall against the weighted criteria, normalise to 0-10."""
    total = math.fsum(prompt.weights.values())
    computed = math.fsum(verdict.scores[c] * w for c, w in prompt.weights.items()) / total
    verdict.computed = round(computed, 6)
    if verdict.overall is not None and given and abs(verdict.overall - computed) > OVERALL_TOLERANCE:
        verdict.warnings.append(
            f"overall_score {verdict.overall:g} differs from the weighted criteria {computed:.2f} by more than 0.5"
        )
    # the multi-judge spec: 1-5 judges' score is the weighted criteria; the 0-10 judge's is its overall_score
    if prompt.kind == "overall" or not given:
        raw = verdict.overall if verdict.overall is not None else computed
    else:
        raw = computed
    if verdict.defaulted:
        verdict.warnings.append(f"defaulted to {SCALES[prompt.scale][2]:g}: {', '.join(verdict.defaulted)}")
    verdict.score = round(normalise(raw, prompt.scale), 6)
    return verdict


def _parse_number(text: str) -> ParsedAnswer:
    try:
        match = _NUMBER.search(text, timeout=_REGEX_TIMEOUT_S)
    except TimeoutError:
        match = None
    if match is None:
        raise JudgeBadResponse("the answer holds no number")
    value = float(match.group(1))
    clamped = min(1.0, max(0.0, value))  # the RAG-evaluation spec: "确保分数在0-1范围内"
    warnings = [] if clamped == value else [f"clamped {value:g} to {clamped:g}"]
    return ParsedAnswer(
        round(clamped * 10.0, 6),
        "0-1",
        "number",
        overall=clamped,
        warnings=warnings,
        reasoning=clip(text.strip(), 500) or None,
    )
