"""Building an evaluator's result and the graded result of an event, fast (streameval.pipeline calls these per
evaluator and per event): pydantic models made through their slots when the values are plain, the
weighted mean without generators, errors and placeholders as evaluator results."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from ._util import clip
from ._version import __version__
from .config import BoundEvaluator, Suite
from .errors import EvaluatorError
from .evaluators import Score
from .grading import apply_gates, grade
from .models import (
    EvaluatorResult,
    GradedResult,
    JudgeBlock,
    RequestEvent,
    format_time,
)

T = TypeVar("T")
perf_counter = time.perf_counter
_validate_event = RequestEvent.__pydantic_validator__.validate_python  # strict: the model's config

__all__ = [
    "built_graded",
    "combined",
    "error_result",
    "graded",
    "placeholder",
    "plain_graded",
    "ready",
    "to_result",
]

log = logging.getLogger(__name__)


def ready(value: T) -> asyncio.Future[T]:
    done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    done.set_result(value)
    return done


def placeholder(bound: BoundEvaluator) -> EvaluatorResult:
    return EvaluatorResult(name=bound.name, score=0.0, passed=False, weight=bound.weight)


def to_result(bound: BoundEvaluator, score: Score) -> EvaluatorResult:
    value = score.score
    if not 0.0 <= value <= 1.0:  # NaN fails both comparisons too
        return EvaluatorResult(
            name=bound.name,
            score=0.0,
            passed=False,
            weight=bound.weight,
            reason=f"evaluator returned score {value!r} outside [0, 1]",
            error="bad_score",
        )
    reason, details, version = score.reason, score.details, score.version
    weight = bound.weight
    if (
        type(value) is float
        and type(score.passed) is bool
        and type(weight) is float
        and weight >= 0.0
        and (reason is None or type(reason) is str)
        and (version is None or type(version) is str)
    ):
        # exactly what validation would store (the same values, details copied as pydantic copies a
        # dict), without pydantic's ~1.3 µs per result; any other type goes through validation below
        if details is None:
            return _built_result(bound.name, value, score.passed, weight, reason, None, version)
        if type(details) is dict and _str_keys(details):
            return _built_result(bound.name, value, score.passed, weight, reason, dict(details), version)
    return EvaluatorResult(
        name=bound.name,
        score=value,
        passed=score.passed,
        weight=bound.weight,
        reason=reason,
        details=details,
        version=version,
    )


def combined(results: list[EvaluatorResult]) -> float:
    """``combine((r.score, r.weight) for r in results)``: the same sums in the same order, without a
    generator."""
    total = weighted = 0.0
    for result in results:
        weight = result.weight
        total += weight
        weighted += result.score * weight
    if total <= 0.0:
        return 0.0
    return min(1.0, max(0.0, weighted / total))


def _str_keys(details: dict[Any, Any]) -> bool:
    for key in details:
        if type(key) is not str:
            return False
    return True


def plain_graded(values: dict[str, Any]) -> bool:
    """Whether ``values`` (the fields :func:`graded` made, without a judge block) already have the
    types and ranges :class:`GradedResult` validates: then validation would store them as they are."""
    score, threshold, latency, reason, category = (
        values["score"],
        values["threshold"],
        values["latency_ms"],
        values["reason"],
        values["category"],
    )
    if not (
        type(score) is float
        and 0.0 <= score <= 1.0
        and type(threshold) is float
        and 0.0 <= threshold <= 1.0
        and type(latency) is float
        and latency >= 0.0
        and type(values["passed"]) is bool
        and type(values["grade"]) is str
        and (reason is None or type(reason) is str)
        and (category is None or type(category) is str)
        and type(values["id"]) is str
        and type(values["model"]) is str
        and type(values["suite"]) is str
    ):
        return False
    for name in values["failed_gates"]:
        if type(name) is not str:
            return False
    for result in values["evaluators"]:
        if type(result) is not EvaluatorResult:
            return False
    return True  # event_time and evaluated_at are format_time's: RFC 3339 by construction


_new_graded = GradedResult.__new__


def built_graded(values: dict[str, Any]) -> GradedResult:
    """The :class:`GradedResult` ``GradedResult(**values)`` builds when :func:`plain_graded` holds, without
    validating the values again (the lists are copied, as validation copies them)."""
    graded = _new_graded(GradedResult)
    fields = {"schema_version": 1, **values}  # values come in the model's field order
    fields["evaluators"] = list(values["evaluators"])
    fields["failed_gates"] = list(values["failed_gates"])
    _set(graded, "__dict__", fields)
    _set_fields_set(graded, set(values))
    _set_extra(graded, None)
    _set_private(graded, None)
    return graded


_new_result = EvaluatorResult.__new__
_set = object.__setattr__
# pydantic's instance slots, set through their descriptors (what object.__setattr__ ends up calling)
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_RESULT_FIELDS_SET = frozenset({"name", "score", "passed", "weight", "reason", "details", "version"})


def graded(
    event: RequestEvent,
    suite: Suite,
    gated: frozenset[str],
    results: list[EvaluatorResult],
    overall: float,
    judge_block: JudgeBlock | None,
    received_at: float,
    now: float,
    marks: Mapping[str, Any],
    redacted: dict[str, int] | None = None,
) -> GradedResult:
    """The graded result of ``event`` in ``suite``: the gates (``gated``: the names of the suite's gate
    evaluators) applied to the overall score; ``now``: when it was evaluated; ``marks``: the fields set on every
    result of the pipeline (shadow, backfill); ``redacted``: what the judges did not see."""
    config = suite.config
    failed_gates: list[str] = []
    reason = None
    if gated:
        verdict = apply_gates(
            overall,
            config.threshold,
            config.grading,
            ((r.name, r.passed and r.error is None, r.reason) for r in results if r.name in gated),
        )
        passed, grade_ = verdict.passed, verdict.grade
        failed_gates = list(verdict.failed_gates)
        reason = clip(verdict.reason) if verdict.reason else None
    else:  # what apply_gates gives without gates
        passed, grade_ = overall >= config.threshold, grade(overall, config.grading)
    values: dict[str, Any] = {
        "id": event.id,
        "model": event.model,
        "suite": suite.name,
        "category": event.category,
        "score": overall,
        "passed": passed,
        "threshold": config.threshold,
        "grade": grade_,
        "evaluators": results,
        "event_time": format_time(event.event_time(received_at)),
        "evaluated_at": format_time(now),
        "latency_ms": round(max(0.0, now - received_at) * 1000, 3),
        "pipeline_version": __version__,
        "judge": judge_block,
        "failed_gates": failed_gates,
        "reason": reason,
        "suite_version": suite.version or None,  # docs/versions.md
        "shadow": marks.get("shadow") if marks else None,
        "backfill": marks.get("backfill") if marks else None,
        "redacted": redacted,
    }
    # a judge block is a JudgeBlock already: validation would keep that very instance
    if (judge_block is None or type(judge_block) is JudgeBlock) and plain_graded(values):
        return built_graded(values)
    return GradedResult(**values)


def _built_result(
    name: str,
    score: float,
    passed: bool,
    weight: float,
    reason: str | None,
    details: dict[str, Any] | None,
    version: str | None,
) -> EvaluatorResult:
    """The :class:`EvaluatorResult` ``EvaluatorResult(name=..., ..., version=...)`` builds from values
    that already have the field types (checked by the caller; ``score`` within [0, 1], ``weight`` >= 0
    as the suite's config guarantees), without validating them again."""
    result = _new_result(EvaluatorResult)
    _set(
        result,
        "__dict__",
        {
            "name": name,
            "score": score,
            "passed": passed,
            "weight": weight,
            "reason": reason,
            "details": details,
            "error": None,
            "version": version,
        },
    )
    _set_fields_set(result, set(_RESULT_FIELDS_SET))
    _set_extra(result, None)
    _set_private(result, None)
    return result


def error_result(bound: BoundEvaluator, exc: Exception, event: RequestEvent) -> EvaluatorResult:
    if isinstance(exc, EvaluatorError):
        code, reason = exc.code, str(exc)
    else:
        log.warning("evaluator %s raised on event %s", bound.name, event.id, exc_info=exc)
        code, reason = "internal", f"{type(exc).__name__}: {exc}"
    return EvaluatorResult(
        name=bound.name, score=0.0, passed=False, weight=bound.weight, reason=clip(reason), error=code
    )
