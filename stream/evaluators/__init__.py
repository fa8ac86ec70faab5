"""Evaluators: one handler per name, resolved through the registry.

Importing this package registers every built-in evaluator.
"""

from __future__ import annotations

from ..sandbox import _evaluator as _sandbox  # noqa: F401  (registers the sandboxed `code` evaluator)
from . import (  # noqa: F401  (report-quality, RAG-evaluation and agent-metrics specs)
    agent,
    answer,
    bleu,
    classification,
    presets,
    rag,
    registered,
    report,
    rouge,
    semantic,
    session,
)
from ._base import (
    Evaluator,
    MissingField,
    NoParams,
    Params,
    Score,
    build_evaluator,
    evaluator_class,
    evaluator_names,
    register,
    unregister,
)

__all__ = [
    "Evaluator",
    "MissingField",
    "NoParams",
    "Params",
    "Score",
    "build_evaluator",
    "evaluator_class",
    "evaluator_names",
    "register",
    "unregister",
]
