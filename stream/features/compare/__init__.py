"""Version comparison (docs/versions.md): each versioned result's compact scores, appended per pair and batch
for ``/api/v1/stats/compare`` and ``streameval backfill`` to read, and the comparison of two versions.

Kept only when something will compare: a shadow suite file, a backfill run, or an explicit
``STREAMEVAL_COMPARE_TTL_S`` (streameval.features.setup). Modules: ``_scores`` (the compact scores' layout
and the comparison: pure functions), ``_recorder`` (the scores appended with each batch, and read back).
"""

from __future__ import annotations

from ._recorder import DEFAULT_TTL_S, CompactScoresRecorder, compact_scores
from ._scores import (
    ABSENT,
    MAX_FLIP_EXAMPLES,
    SLICES_MARK,
    Compact,
    compact,
    compare,
    compare_slices,
    kappa,
    pack_chunk,
    pack_slices,
    rank,
    unpack_chunks,
)

__all__ = [
    "ABSENT",
    "DEFAULT_TTL_S",
    "MAX_FLIP_EXAMPLES",
    "SLICES_MARK",
    "Compact",
    "CompactScoresRecorder",
    "compact",
    "compact_scores",
    "compare",
    "compare_slices",
    "kappa",
    "pack_chunk",
    "pack_slices",
    "rank",
    "unpack_chunks",
]
