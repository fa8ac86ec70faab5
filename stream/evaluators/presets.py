"""The five preset evaluators of the evaluator-module spec: exact_match, contains, regex, json_schema, similarity.

All compare ``output`` with the event's targets: ``expected`` when present, otherwise each of the
``references`` (the best match counts). An event with neither fails the evaluator with
error ``missing_field`` rather than passing silently.
"""

from __future__ import annotations

import math
from collections import Counter
from time import monotonic
from typing import Any, Literal

import orjson
import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError
from pydantic import Field, PrivateAttr, field_validator, model_validator
from rapidfuzz.distance import Levenshtein

from .._util import as_written, clip, json_path
from ..errors import EvaluatorTimeout
from ..models import RequestEvent
from ..signals import CHECK_DEADLINE
from ._base import Evaluator, NoParams, Params, Score, register
from ._text import word_tokens

_LEAST_TIMEOUT_S = 1e-6  # a check past its deadline: the regex module's least useful limit
_SHOWN = 80  # characters of a pattern or expected answer quoted in a reason

# the last text quoted by _shown and its quoted form: exact_match and contains quote the same expected
# answer of an event (a string of the event, so the same object)
_last_shown: tuple[str, str] = ("", "''")


def _shown(text: str) -> str:
    """``as_written(clip(text, _SHOWN))``, remembered for the last text."""
    global _last_shown
    last = _last_shown
    if text is last[0]:
        return last[1]
    quoted = as_written(clip(text, _SHOWN))
    _last_shown = (text, quoted)
    return quoted


__all__ = ["Contains", "ExactMatch", "JsonSchema", "RegexMatch", "Similarity"]


@register
class ExactMatch(Evaluator):
    """The evaluator-module spec §3.1: ``output === expected`` (no normalisation; see exact_match_normalized)."""

    name = "exact_match"
    summary = "output is exactly the expected answer"
    Params = NoParams

    def evaluate(self, event: RequestEvent) -> Score:
        targets = self.targets(event)
        output = event.output
        for index, target in enumerate(targets):
            if output == target:
                return Score(1.0, True, "output equals the expected answer", {"target": index})
        return Score(0.0, False, f"output differs from the expected answer {_shown(targets[0])}")


class ContainsParams(Params):
    value: str | None = Field(
        default=None, description="text to look for; default: the event's expected answer"
    )
    ignore_case: bool = Field(default=False, description="compare case-insensitively (casefold)")


@register
class Contains(Evaluator):
    """The evaluator-module spec §3.2: ``output.includes(expected)``."""

    name = "contains"
    summary = "output contains the expected text"
    Params = ContainsParams
    params: ContainsParams

    def evaluate(self, event: RequestEvent) -> Score:
        params = self.params
        ignore_case = params.ignore_case
        needles = [params.value] if params.value is not None else self.targets(event)
        haystack = event.output.casefold() if ignore_case else event.output
        for needle in needles:
            probe = needle.casefold() if ignore_case else needle
            if probe in haystack:
                return Score(1.0, True, f"output contains {_shown(needle)}")
        return Score(0.0, False, f"output does not contain {_shown(needles[0])}")


# JavaScript RegExp flags (the evaluator-module spec uses `new RegExp(pattern, flags)`) mapped onto the regex
# module.
_REGEX_FLAGS = {
    "i": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "s": regex.DOTALL,
    "u": 0,  # patterns are always Unicode here
    "g": 0,  # .test() ignores global for a fresh RegExp
    "x": regex.VERBOSE,  # not JS, but common in Python configs
}


class RegexParams(Params):
    pattern: str = Field(
        description="regular expression (regex module syntax, a superset of JS)", examples=[r"\d+"]
    )
    flags: str = Field(default="", description="any of i, m, s, u, g, x (JavaScript RegExp flags)")
    timeout_ms: float = Field(
        default=100.0, gt=0, le=10_000, description="per-call time limit; guards against ReDoS"
    )
    _compiled: Any = PrivateAttr()

    @field_validator("flags")
    @classmethod
    def _known_flags(cls, flags: str) -> str:
        unknown = sorted(set(flags) - set(_REGEX_FLAGS))
        if unknown:
            raise ValueError(
                f"unknown regex flag(s) {''.join(unknown)!r}; valid flags: {''.join(_REGEX_FLAGS)}"
            )
        return flags

    @model_validator(mode="after")
    def _compile(self) -> RegexParams:
        bits = 0
        for flag in self.flags:
            bits |= _REGEX_FLAGS[flag]
        try:
            self._compiled = regex.compile(self.pattern, bits)
        except regex.error as exc:
            raise ValueError(f"invalid regular expression {as_written(self.pattern)}: {exc}") from None
        return self


@register
class RegexMatch(Evaluator):
    """The evaluator-module spec §3.3: ``new RegExp(pattern, flags).test(output)``, with a per-call timeout."""

    name = "regex"
    summary = "output matches a regular expression"
    Params = RegexParams
    params: RegexParams

    def __init__(self, params: RegexParams) -> None:
        super().__init__(params)
        # read once: a pydantic private attribute costs ~1 µs per access, the quoted pattern ~1 µs to build
        self._search = params._compiled.search
        self._timeout_s = params.timeout_ms / 1000
        self._shown = as_written(clip(params.pattern, _SHOWN))
        self._matches = f"output matches {self._shown}"
        self._no_match = f"output does not match {self._shown}"

    def evaluate(self, event: RequestEvent) -> Score:
        timeout = self._timeout_s
        deadline = CHECK_DEADLINE.get()
        if deadline is not None:  # a guard check (docs/guard.md): never past its deadline
            timeout = min(timeout, max(deadline.at - monotonic(), _LEAST_TIMEOUT_S))
        try:
            match = self._search(event.output, timeout=timeout)
        except TimeoutError:
            if deadline is not None and timeout < self._timeout_s:
                deadline.cut = True
                raise EvaluatorTimeout(f"regex {self._shown} stopped at the check's deadline") from None
            raise EvaluatorTimeout(
                f"regex {self._shown} timed out after {self.params.timeout_ms:g} ms"
            ) from None
        if match is None:
            return Score(0.0, False, self._no_match)
        return Score(1.0, True, self._matches, {"span": list(match.span())})


class JsonSchemaParams(Params):
    schema_: dict[str, Any] = Field(
        alias="schema",
        description="JSON Schema the parsed output must satisfy",
        examples=[{"type": "object", "required": ["answer"]}],
    )
    max_errors: int = Field(default=5, ge=1, le=100, description="schema errors listed in the reason")
    _validator: Any = PrivateAttr()

    @model_validator(mode="after")
    def _build(self) -> JsonSchemaParams:
        cls = validators.validator_for(self.schema_, default=Draft202012Validator)
        try:
            cls.check_schema(self.schema_)
        except SchemaError as exc:
            raise ValueError(f"invalid JSON Schema: {exc.message}") from None
        self._validator = cls(self.schema_)
        return self


@register
class JsonSchema(Evaluator):
    """The evaluator-module spec §3.4: output parsed as JSON must satisfy the schema. Parse failure and schema
    failure both fail, with the reason (the first ``max_errors`` schema errors, by path)."""

    name = "json_schema"
    summary = "output is JSON that satisfies a JSON Schema"
    Params = JsonSchemaParams
    params: JsonSchemaParams

    def __init__(self, params: JsonSchemaParams) -> None:
        super().__init__(params)
        self._iter_errors = params._validator.iter_errors  # a private attribute costs ~1 µs per access

    def evaluate(self, event: RequestEvent) -> Score:
        try:
            document = orjson.loads(event.output)
        except orjson.JSONDecodeError as exc:
            return Score(0.0, False, f"output is not valid JSON: {exc}", {"stage": "parse"})
        errors = list(self._iter_errors(document))
        if not errors:
            return Score(1.0, True, "output satisfies the schema")
        errors.sort(key=lambda e: list(e.absolute_path))  # stable, as sorted()
        shown = errors[: self.params.max_errors]
        reason = "; ".join(f"{json_path(e.absolute_path)}: {e.message}" for e in shown)
        if len(errors) > len(shown):
            reason += f"; and {len(errors) - len(shown)} more"
        return Score(0.0, False, f"schema: {reason}", {"stage": "schema", "errors": len(errors)})


def levenshtein(a: str, b: str, *, hint: float | None = None) -> float:
    """1 - edit distance / length of the longer string (1.0 for two empty strings).

    ``hint`` is rapidfuzz's ``score_hint``, an expected similarity: it only picks the band the exact
    algorithm starts with (the band doubles until it holds the distance), never the result.
    """
    return float(Levenshtein.normalized_similarity(a, b, score_hint=hint))


def jaccard(a: str, b: str) -> float:
    """|A ∩ B| / |A ∪ B| over word-token sets (CJK: per character); 1.0 when both are empty."""
    sa, sb = set(word_tokens(a)), set(word_tokens(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def cosine(a: str, b: str) -> float:
    """Cosine of term-frequency vectors over word tokens; 1.0 when both are empty, 0.0 when one is."""
    ca, cb = Counter(word_tokens(a)), Counter(word_tokens(b))
    if not ca and not cb:
        return 1.0
    if not ca or not cb:
        return 0.0
    dot = sum(count * cb[token] for token, count in ca.items())
    norm = math.sqrt(sum(c * c for c in ca.values())) * math.sqrt(sum(c * c for c in cb.values()))
    return min(1.0, dot / norm)


SIMILARITY = {"levenshtein": levenshtein, "jaccard": jaccard, "cosine": cosine}


class SimilarityParams(Params):
    threshold: float = Field(default=0.8, ge=0.0, le=1.0, description="pass at or above")
    algorithm: Literal["levenshtein", "cosine", "jaccard"] = Field(
        default="levenshtein", description="levenshtein, cosine or jaccard"
    )


@register
class Similarity(Evaluator):
    """The evaluator-module spec §3.5: ``similarity(output, expected) >= threshold``; the score is the similarity."""

    name = "similarity"
    summary = "text similarity to the expected answer is at least a threshold"
    Params = SimilarityParams
    params: SimilarityParams

    # Levenshtein band hint: the last score minus a margin. A stream of similar outputs then runs in a
    # narrow band (300-token texts ~3x faster); a hint a little below the truth costs nothing, one far
    # above it up to ~2x. The score is exact whatever the hint (see levenshtein()).
    _hint: float | None = None

    def __init__(self, params: SimilarityParams) -> None:
        super().__init__(params)
        self._levenshtein = params.algorithm == "levenshtein"
        self._threshold = params.threshold
        # the reason's fixed parts, written once
        self._named = f"{params.algorithm} similarity "
        self._at_least = f" is at least {params.threshold:g}"
        self._below = f" is below {params.threshold:g}"

    def evaluate(self, event: RequestEvent) -> Score:
        output, targets = event.output, self.targets(event)
        if self._levenshtein:
            hint = self._hint
            if len(targets) == 1:
                score = levenshtein(output, targets[0], hint=hint)
            else:
                score = max(levenshtein(output, target, hint=hint) for target in targets)
            self._hint = max(0.0, score - 0.05)
        else:
            measure = SIMILARITY[self.params.algorithm]
            score = max(measure(output, target) for target in targets)
        passed = score >= self._threshold
        return Score(score, passed, f"{self._named}{score:.3f}{self._at_least if passed else self._below}")
