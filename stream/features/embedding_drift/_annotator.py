"""The live pipeline's embedding-drift annotator: each sampled output's vector and sample, noted in the
outcome's annotations (``KEY``) for the recorder (``_recorder``) to add to its window."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ...embedding import encoder
from ...evaluators.semantic import SemanticSimilarity
from ...models import GradedResult, RequestEvent
from ._drift import DriftSample, EmbeddingDriftConfig, sample, sampled
from ._recorder import KEY

__all__ = ["DriftAnnotator"]

log = logging.getLogger(__name__)


class DriftAnnotator:
    """Each output's embedding-drift sample (streameval.feature.Annotator), when its event is sampled: the
    vectors the batch's semantic_similarity evaluators embedded, the rest from one
    :meth:`~streameval.embedding.Encoder.encode_exact` call (either way, a text's vector does not depend on
    its batch)."""

    key = KEY

    def __init__(self, config: EmbeddingDriftConfig) -> None:
        self.config = config

    def annotate(
        self, evaluated: Sequence[tuple[RequestEvent, GradedResult, Any]]
    ) -> list[DriftSample | None]:
        cfg = self.config
        events = [event for event, _, _ in evaluated]
        chosen = [e for e in events if sampled(e.id, cfg.sample_rate)]
        if not chosen:
            return [None] * len(events)
        try:
            known: dict[str, Any] = {}
            for suite in {s.name: s for _, _, s in evaluated}.values():
                for bound in suite.evaluators:
                    if isinstance(bound.evaluator, SemanticSimilarity):
                        known.update(bound.evaluator.batch_vectors(cfg.folder))
            texts = sorted({e.output for e in chosen if e.output not in known})
            vectors = dict(zip(texts, encoder(cfg.folder).encode_exact(texts), strict=True)) if texts else {}
            vectors.update((e.output, known[e.output]) for e in chosen if e.output in known)
            return [
                sample(vectors[e.output], e.id, cfg) if sampled(e.id, cfg.sample_rate) else None
                for e in events
            ]
        except Exception:  # the evaluation goes on without them
            log.warning("embedding drift: could not embed a batch's outputs", exc_info=True)
            return [None] * len(events)

    def step(self, document: dict[str, Any], now: float) -> None:
        return None
