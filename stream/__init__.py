"""streameval: a streaming evaluator for LLM outputs.

Faust agents consume request events from Kafka, apply the evaluators configured per suite, record
idempotent windowed aggregates in Redis and publish graded results. The same :class:`Pipeline`
evaluates a JSONL file offline. Everything here is free of Faust; the Faust wiring is
``streameval.agents``.
"""

from __future__ import annotations

from ._version import __version__
from .config import Suites, load_config, parse_config
from .errors import (
    ConfigError,
    EvaluatorError,
    EvaluatorTimeout,
    EventError,
    StoreUnavailable,
    StreamEvalError,
)
from .evaluators import Evaluator, Score, build_evaluator, evaluator_names, register
from .grading import combine, grade
from .models import Aggregate, Alert, DeadLetter, EvaluatorResult, GradedResult, RequestEvent
from .pipeline import Outcome, Pipeline, Source
from .processor import Processor
from .settings import Settings, load_settings
from .store import ResultStore

__all__ = [
    "Aggregate",
    "Alert",
    "ConfigError",
    "DeadLetter",
    "Evaluator",
    "EvaluatorError",
    "EvaluatorResult",
    "EvaluatorTimeout",
    "EventError",
    "GradedResult",
    "Outcome",
    "Pipeline",
    "Processor",
    "RequestEvent",
    "ResultStore",
    "Score",
    "Settings",
    "Source",
    "StoreUnavailable",
    "StreamEvalError",
    "Suites",
    "__version__",
    "build_evaluator",
    "combine",
    "evaluator_names",
    "grade",
    "load_config",
    "load_settings",
    "parse_config",
    "register",
]
