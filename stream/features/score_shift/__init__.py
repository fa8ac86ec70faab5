"""Score-shift detection (docs/drift.md): a sequential change detector (two-sided CUSUM plus an EWMA) on every
score series of every model × suite, folded as windows close (the window closer runs it when the suite
file has ``windowing.score_shift``). ``_detector``: its logic and settings, pure functions.
"""

from __future__ import annotations

from ._detector import Change, Detector, ScoreShiftConfig, SeriesState, cusum_h, fold, window_series

__all__ = ["Change", "Detector", "ScoreShiftConfig", "SeriesState", "cusum_h", "fold", "window_series"]
