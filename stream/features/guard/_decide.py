"""The decision rule (docs/guard.md): a graded result and a suite's guard section to ``allow``, ``warn`` or
``block``, with the reasons. A pure function: the checker adds ``mask`` and the timeout answer."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ...models import GradedResult
from ._config import Decision, GuardConfig

__all__ = ["Verdict", "decide"]


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    reasons: tuple[str, ...]  #: why, in the order the rule looked: blocking evaluators, score bands


def _failed(result: GradedResult, names: Collection[str]) -> list[str]:
    return [
        f"{e.name} failed: {e.error or e.reason or 'no reason given'}"
        for e in result.evaluators
        if e.name in names and not e.passed
    ]


def decide(result: GradedResult, guard: GuardConfig, gates: Collection[str]) -> Verdict:
    """``block`` when an evaluator of ``block_on`` (default: the suite's ``gates``) did not pass, or the score
    is below ``block_below`` (default: the suite's threshold); else ``warn`` when one of ``warn_on`` did not
    pass or the score is below ``warn_below``; else ``allow``. An evaluator that could not score (an
    error, a regex timeout) did not pass."""
    blocking = _failed(result, gates if guard.block_on is None else guard.block_on)
    floor = result.threshold if guard.block_below is None else guard.block_below
    if result.score < floor:
        blocking.append(f"score {result.score:.4g} is below {floor:g}")
    if blocking:
        return Verdict("block", tuple(blocking))
    warning = _failed(result, guard.warn_on)
    if guard.warn_below is not None and result.score < guard.warn_below:
        warning.append(f"score {result.score:.4g} is below {guard.warn_below:g}")
    if warning:
        return Verdict("warn", tuple(warning))
    return Verdict("allow", ())
