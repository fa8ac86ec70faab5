"""Grade scales and the weighted combination of evaluator scores.

Two scales, chosen per suite with ``grading``:

* ``levels`` (the multi-judge spec, "评分等级"), on score × 10: >= 9.0 excellent, >= 7.5 good, >= 6.0 pass,
  >= 3.0 fail, otherwise severe_defect.
* ``letters`` (the report-quality spec, "等级对照表"), on score × 10: A+ >= 9.0, A >= 8.5, A- >= 8.0, B+ >= 7.5,
  B >= 7.0, B- >= 6.5, C+ >= 6.0, C >= 5.5, C- >= 5.0, D >= 4.0, otherwise F. (The report-quality spec's
  worked example, 8.94, is an A.)

Hard gates (``gate: true`` on a suite's evaluator): :func:`apply_gates` fails a result whose gate did
not pass, whatever the weighted mean, and gives it the scale's lowest grade.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["GRADE_SCALES", "GradeScale", "Verdict", "apply_gates", "combine", "grade", "lowest_grade"]

GradeScale = Literal["levels", "letters"]

GRADE_SCALES: dict[str, list[tuple[float, str]]] = {
    # the multi-judge spec: grade_score()
    "levels": [
        (9.0, "excellent"),
        (7.5, "good"),
        (6.0, "pass"),
        (3.0, "fail"),
        (float("-inf"), "severe_defect"),
    ],
    # the report-quality spec: letter grade table
    "letters": [
        (9.0, "A+"),
        (8.5, "A"),
        (8.0, "A-"),
        (7.5, "B+"),
        (7.0, "B"),
        (6.5, "B-"),
        (6.0, "C+"),
        (5.5, "C"),
        (5.0, "C-"),
        (4.0, "D"),
        (float("-inf"), "F"),
    ],
}


def grade(score: float, scale: GradeScale = "levels") -> str:
    """The grade of a 0-1 score on ``scale`` (the specs' tables are on 0-10)."""
    ten = round(score * 10, 9)  # 0.3 * 10 is 3.0000000000000004; grade boundaries are decimal
    for floor, name in GRADE_SCALES[scale]:
        if ten >= floor:
            return name
    raise AssertionError("unreachable: every scale ends at -inf")


def combine(scored: Iterable[tuple[float, float]]) -> float:
    """Weighted mean of ``(score, weight)`` pairs: Σ score × weight ÷ Σ weight, clamped to [0, 1].

    A total weight of 0 (no evaluator, or all weights 0) gives 0.0: nothing was shown to pass.
    Config validation rejects suites whose weights sum to 0, so this is a guard, not a path.
    """
    total = weighted = 0.0
    for score, weight in scored:
        total += weight
        weighted += score * weight
    if total <= 0.0:
        return 0.0
    return min(1.0, max(0.0, weighted / total))


def lowest_grade(scale: GradeScale = "levels") -> str:
    """The bottom grade of ``scale``: ``severe_defect`` or ``F``."""
    return GRADE_SCALES[scale][-1][1]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Pass/fail and grade of one result after its gates; ``failed_gates`` in suite order."""

    passed: bool
    grade: str
    failed_gates: tuple[str, ...] = ()
    reason: str | None = None


def apply_gates(
    score: float, threshold: float, scale: GradeScale, gates: Iterable[tuple[str, bool, str | None]]
) -> Verdict:
    """The verdict of a result from its score and its gates' ``(name, passed, reason)``.

    No failed gate: passed = score >= threshold, the grade of the score. Any failed gate: not passed,
    the lowest grade, and a reason naming each failed gate (with the gate's own reason).
    """
    failed = [(name, why) for name, passed, why in gates if not passed]
    if not failed:
        return Verdict(score >= threshold, grade(score, scale))
    parts = [f"gate {name!r} failed" + (f": {why}" if why else "") for name, why in failed]
    return Verdict(False, lowest_grade(scale), tuple(name for name, _ in failed), "; ".join(parts))
