"""Prometheus metrics of result quality by model and suite, so Grafana can chart quality per model.

::

    streameval_result_score_bucket/_sum/_count{model, suite}   histogram of scores (0-1)
    streameval_result_passed_total{model, suite}               results that passed
    streameval_result_grades_total{model, suite, grade}        results by grade
    streameval_result_gate_failures_total{suite, gate}         results failed by a hard gate

Suites, grades and gates are bounded by the suite file. Model names come from producers, so they are
bounded here: the first ``max_models`` distinct names (``STREAMEVAL_METRICS_MAX_MODELS``) keep their
own label, later ones are counted under ``model="other"``; the limit holds per worker process.
Mean score = ``rate(_sum) / rate(_count)``; pass rate = ``rate(passed_total) / rate(score_count)``.
The Grafana dashboard in deploy/grafana/ uses exactly these.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Sequence

from prometheus_client import Counter, Histogram
from prometheus_client.values import MutexValue

from .envelope import Outcome

__all__ = ["DEFAULT_MAX_MODELS", "OTHER_MODEL", "ModelLabels", "configure", "observe", "observe_many"]

DEFAULT_MAX_MODELS = 50
OTHER_MODEL = "other"

RESULT_SCORE = Histogram(
    "streameval_result_score",
    "combined score of each graded result (0-1), by model and suite",
    ["model", "suite"],
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
)
RESULT_PASSED = Counter(
    "streameval_result_passed", "graded results that passed, by model and suite", ["model", "suite"]
)
RESULT_GRADES = Counter(
    "streameval_result_grades", "graded results by grade, model and suite", ["model", "suite", "grade"]
)
GATE_FAILURES = Counter(
    "streameval_result_gate_failures", "results failed by a hard gate, by suite and gate", ["suite", "gate"]
)


class ModelLabels:
    """The label value of a model name: itself for the first ``limit`` distinct names, then ``other``."""

    def __init__(self, limit: int = DEFAULT_MAX_MODELS) -> None:
        if limit < 0:
            raise ValueError("the model label limit must be 0 or more")
        self.limit = limit
        self._known: set[str] = set()

    def __call__(self, model: str) -> str:
        if model in self._known:
            return model
        if len(self._known) < self.limit and model != OTHER_MODEL:
            self._known.add(model)
            return model
        return OTHER_MODEL


_labels = ModelLabels()


def configure(*, max_models: int) -> None:
    """Set the model label limit (the worker calls this once at start)."""
    global _labels
    _labels = ModelLabels(max_models)


def observe(outcomes: Sequence[Outcome]) -> None:
    """Count the graded results of one batch: one increment per series (one ``labels`` lookup, one
    lock) per batch instead of four per result; the exported values are the same."""
    scores: dict[tuple[str, str], list[float]] = {}
    passed: Tally[tuple[str, str]] = Tally()
    grades: Tally[tuple[str, str, str]] = Tally()
    gates: Tally[tuple[str, str]] = Tally()
    for outcome in outcomes:
        result = outcome.result
        if result is None:
            continue
        pair = (_labels(result.model), result.suite)
        found = scores.get(pair)
        if found is None:
            scores[pair] = [result.score]
        else:
            found.append(result.score)
        if result.passed:
            passed[pair] += 1
        grades[(*pair, result.grade)] += 1
        for gate in result.failed_gates:
            gates[(result.suite, gate)] += 1
    for pair, values in scores.items():
        observe_many(RESULT_SCORE.labels(*pair), values)
    for pair, count in passed.items():
        RESULT_PASSED.labels(*pair).inc(count)
    for key, count in grades.items():
        RESULT_GRADES.labels(*key).inc(count)
    for (suite, gate), count in gates.items():
        GATE_FAILURES.labels(suite, gate).inc(count)


def observe_many(child: Histogram, amounts: list[float]) -> None:
    """``child.observe(a)`` for each of ``amounts``, with one increment per bucket touched. The sum is
    added in the same order as one observe at a time would (the same float, bit for bit)."""
    total = getattr(child, "_sum", None)
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    if (
        not isinstance(total, MutexValue) or bounds is None or buckets is None
    ):  # multiprocess mode, another version
        for amount in amounts:
            child.observe(amount)
        return
    counts: dict[int, int] = {}
    with total._lock:
        value = total._value
        for amount in amounts:
            value += amount
            i = bisect_left(bounds, amount)  # observe(): the first bucket whose bound is >= amount
            counts[i] = counts.get(i, 0) + 1
        total._value = value
    for i, count in counts.items():
        buckets[i].inc(count)
