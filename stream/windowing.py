"""The suite file's ``windowing:`` block: when windows close and who publishes them.

The definition of windows, apart from their runtime (:class:`~streameval.windows.WindowCloser`), so the
configuration loader reads it without importing the store.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .features.embedding_drift import EmbeddingDriftConfig
from .features.score_shift import ScoreShiftConfig

__all__ = ["WindowingConfig"]


class WindowingConfig(BaseModel):
    """The suite file's optional top-level ``windowing:`` block (the window sizes are STREAMEVAL_WINDOWS)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_lateness_s: float = Field(
        default=5.0, ge=0.0, description="a window closes this long after its end (Redis clock)"
    )
    close_interval_s: float = Field(
        default=1.0, gt=0.0, description="how often each worker looks for due windows"
    )
    lease_s: float = Field(
        default=30.0,
        gt=0.0,
        description="a window's publisher has this long before another worker may take over",
    )
    score_shift: ScoreShiftConfig | None = Field(
        default=None, description="change detection on every score series (docs/drift.md); none: off"
    )
    embedding_drift: EmbeddingDriftConfig | None = Field(
        default=None,
        description="outputs' embeddings per window compared with a reference (docs/drift.md); none: off",
    )
