"""Redaction before judging: personal data and secrets never leave for an external judge (docs/redact.md).

A self-contained feature: the suite file's ``redact:`` block (:class:`RedactConfig`, per suite
:class:`RedactOverride`), the built-in detectors (:data:`DETECTORS`) and the :class:`Redactor` that
replaces what they find by placeholders (``[EMAIL_1]``). The engine calls it at a few boundaries: the
judge prompts' event, review items, drill-down examples and dead letters; rule evaluators keep the
original text.
"""

from __future__ import annotations

from ._config import (
    FIELDS,
    DeadLetterRaw,
    Mode,
    PatternSpec,
    RedactConfig,
    RedactOverride,
    effective,
    redact_issues,
)
from ._detectors import DETECTORS, Detector, DetectorName, Shape, cn_id_valid, iban_valid, luhn_valid
from ._redactor import WITHHELD, Redactor, Scope
from ._wiring import Redactors, build_redactors, count_redactions, redact_command, redact_raw

__all__ = [
    "DETECTORS",
    "FIELDS",
    "WITHHELD",
    "DeadLetterRaw",
    "Detector",
    "DetectorName",
    "Mode",
    "PatternSpec",
    "RedactConfig",
    "RedactOverride",
    "Redactor",
    "Redactors",
    "Scope",
    "Shape",
    "build_redactors",
    "cn_id_valid",
    "count_redactions",
    "effective",
    "iban_valid",
    "luhn_valid",
    "redact_command",
    "redact_issues",
    "redact_raw",
]
