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

from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from .envelope import Outcome

__all__ = ["DEFAULT_MAX_MODELS", "OTHER_MODEL", "ModelLabels", "configure", "observe"]

DEFAULT_MAX_MODELS = 50
OTHER_MODEL = "other"

RESULT_SCORE = Histogram(
    "streameval_result_score", "combined score of each graded result (0-1), by model and suite",
    ["model", "suite"], buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
)  # fmt: skip
RESULT_PASSED = Counter("streameval_result_passed", "graded results that passed, by model and suite", ["model", "suite"])
RESULT_GRADES = Counter("streameval_result_grades", "graded results by grade, model and suite", ["model", "suite", "grade"])
GATE_FAILURES = Counter("streameval_result_gate_failures", "results failed by a hard gate, by suite and gate", ["suite", "gate"])


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
    """Count the graded results of one batch."""
    for outcome in outcomes:
        result = outcome.result
        if result is None:
            continue
        model = _labels(result.model)
        RESULT_SCORE.labels(model, result.suite).observe(result.score)
        if result.passed:
            RESULT_PASSED.labels(model, result.suite).inc()
        RESULT_GRADES.labels(model, result.suite, result.grade).inc()
        for gate in result.failed_gates:
            GATE_FAILURES.labels(result.suite, gate).inc()
