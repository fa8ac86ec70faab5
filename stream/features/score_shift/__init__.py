"""Score-shift detection (docs/drift.md): a sequential change detector (two-sided CUSUM plus an EWMA) on every
score series of every model × suite, folded as windows close. Built only when the suite file has
``windowing.score_shift`` (streameval.features.setup). ``_detector``: its logic and settings, pure functions;
``_step``: the window closer's step that queues and folds the windows (a streameval.feature window step).
"""

from __future__ import annotations

from ._detector import Change, Detector, ScoreShiftConfig, SeriesState, cusum_h, fold, window_series
from ._step import ScoreShiftStep

__all__ = [
    "Change",
    "Detector",
    "ScoreShiftConfig",
    "ScoreShiftStep",
    "SeriesState",
    "cusum_h",
    "fold",
    "window_series",
]
