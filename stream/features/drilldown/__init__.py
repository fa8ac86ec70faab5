"""Drill-down examples (docs/api.md, "Drill-down examples and results"): per window, the lowest-scored results
and a sample of the failed ones, kept as each batch is recorded. Alert rules list the window's
lowest-scored ids from them, so the composition root turns this on for a suite file with alert rules or
score-shift detection, or when ``STREAMEVAL_EXAMPLES`` is set (streameval.features.setup).

Modules: ``_examples`` (which results are candidates, their compact form), ``_recorder`` (the record
script's block that keeps them: a streameval.feature recorder), ``_window`` (the ids an alert lists, read
when its window is published).
"""

from __future__ import annotations

from ._examples import KINDS, MAX_TEXT, Candidates, Example, compact, example_ids, parse, sample_rank
from ._recorder import ExamplesRecorder
from ._window import worst_ids

__all__ = [
    "KINDS",
    "MAX_TEXT",
    "Candidates",
    "Example",
    "ExamplesRecorder",
    "compact",
    "example_ids",
    "parse",
    "sample_rank",
    "worst_ids",
]
