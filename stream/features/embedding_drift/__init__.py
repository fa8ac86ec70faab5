"""Embedding drift (docs/drift.md): how far a window's outputs moved, in meaning, from a reference. Built only
when the suite file has ``windowing.embedding_drift`` (streameval.features.setup).

Modules: ``_drift`` (the numbers: the settings block, an event's sample, a window's sums, the comparison),
``_annotator`` (each sampled output's sample on the live pipeline, in the outcome's annotations: a
streameval.feature annotator), ``_recorder`` (the record script's block that adds a window's sums and reservoir: a streameval.feature
recorder), ``_step`` (the window closer's step that folds each published window into the pair's reference
and sends the alert: a streameval.feature window step). ``_step`` is imported by the composition root alone
(streameval.features.setup): the closer's side is not loaded with the numbers.
"""

from __future__ import annotations

from ._annotator import DriftAnnotator
from ._drift import (
    SCALE,
    Drift,
    DriftSample,
    EmbeddingDriftConfig,
    Verdict,
    WindowSums,
    event_hash,
    merge_reservoir,
    pack_sums,
    sample,
    sampled,
    sum_samples,
    unpack_sums,
)
from ._recorder import KEY, DriftRecorder

__all__ = [
    "KEY",
    "SCALE",
    "Drift",
    "DriftAnnotator",
    "DriftRecorder",
    "DriftSample",
    "EmbeddingDriftConfig",
    "Verdict",
    "WindowSums",
    "event_hash",
    "merge_reservoir",
    "pack_sums",
    "sample",
    "sampled",
    "sum_samples",
    "unpack_sums",
]
