"""Embedding drift (docs/drift.md): how far a window's outputs moved, in meaning, from a reference. Built only
when the suite file has ``windowing.embedding_drift`` (streameval.features.setup).

Modules: ``_drift`` (the numbers: the settings block, an event's sample, a window's sums, the comparison),
``_recorder`` (the record script's block that adds a window's sums and reservoir: a streameval.feature
recorder), ``_step`` (the window closer's step that folds each published window into the pair's reference
and sends the alert: a streameval.feature window step). ``_step`` is not imported here: the envelope reads
``_drift`` (an event's sample) and must not load the closer's side (telemetry imports the envelope).
"""

from __future__ import annotations

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
from ._recorder import DriftRecorder

__all__ = [
    "SCALE",
    "Drift",
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
