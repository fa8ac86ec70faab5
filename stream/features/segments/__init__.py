"""Slices (docs/segments.md): every window of a model × suite kept per value of each dimension of the suite
file's ``segments:``, capped per dimension, pair and window, recorded in the pair's one record call; their
aggregates and alerts published with the window's (a window step); the API's reads of them (``web``).

Built only when the suite file has ``segments:`` (streameval.features.setup)."""

from __future__ import annotations

from ._annotator import SlicesAnnotator
from ._config import (
    DEFAULT_MAX_VALUES,
    INVALID,
    MAX_VALUE_CHARS,
    MISSING,
    OTHER,
    Dimension,
    DimensionConfig,
    SegmentsConfig,
    event_slices,
)
from ._recorder import SLICE_FIGURES, SlicesRecorder
from ._step import SlicesStep, read_slices, slice_aggregates

__all__ = [
    "DEFAULT_MAX_VALUES",
    "INVALID",
    "MAX_VALUE_CHARS",
    "MISSING",
    "OTHER",
    "SLICE_FIGURES",
    "Dimension",
    "DimensionConfig",
    "SegmentsConfig",
    "SlicesAnnotator",
    "SlicesRecorder",
    "SlicesStep",
    "event_slices",
    "read_slices",
    "slice_aggregates",
]
