"""``semantic_similarity``: cosine of sentence embeddings of the output and its targets (the best counts).

The embeddings come from :mod:`streameval.embedding` (the ``semantic`` extra: numpy over a packaged
model's weights). A suite without the extra installed fails at start, naming the extra.

Cost: an embedding is ~50-300x dearer than a levenshtein check (bench/semantic.py, docs/drift.md).
The pipeline hands the evaluator each batch's events first (:meth:`SemanticSimilarity.prepare`), so
the batch's outputs and targets go through the model together, texts of one token count per matrix
product (``encode_exact``: no padding, so a text's vector, and the score, do not depend on its batch;
embedding drift reuses the vectors); ``sample_rate`` evaluates only a deterministic share of the events (same id hash as a
judge panel's ``sample_rate``), the rest get no ``semantic_similarity`` entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from ..embedding import DEFAULT_MODEL, Encoder, MissingExtra, encoder, find_model, require_extra
from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register

__all__ = ["SemanticSimilarity", "SemanticSimilarityParams"]

#: texts kept between a batch's prepare() and its evaluate() calls; a batch larger than this is
#: embedded again per event for the rest (never happens with the worker's batch sizes)
_CACHE_TEXTS = 8192


class SemanticSimilarityParams(Params):
    threshold: float = Field(default=0.7, ge=-1.0, le=1.0, description="pass when the cosine is at or above")
    model: str = Field(
        default=DEFAULT_MODEL,
        description="import name of an installed package that ships a sentence-transformers BERT model "
        "(config.json, model.safetensors, tokenizer.json), or a directory with those files",
    )
    sample_rate: float = Field(
        default=1.0, gt=0.0, le=1.0, description="share of events evaluated (deterministic by event id)"
    )
    _folder: Any = PrivateAttr()

    @model_validator(mode="after")
    def _model_installed(self) -> SemanticSimilarityParams:
        try:
            require_extra()
            self._folder = find_model(self.model)
        except MissingExtra as exc:
            raise ValueError(str(exc)) from None
        return self


def _sampled(event_id: str, rate: float) -> bool:
    if rate >= 1.0:
        return True
    return int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "big") / 2.0**64 < rate


@register
class SemanticSimilarity(Evaluator):
    """max over targets of cos(embed(output), embed(target)) >= threshold; the score is the cosine
    clipped to [0, 1] (a negative cosine scores 0), the cosine itself is in ``details``."""

    name = "semantic_similarity"
    summary = "meaning close to the expected answer: cosine of sentence embeddings"
    Params = SemanticSimilarityParams
    params: SemanticSimilarityParams

    def __init__(self, params: SemanticSimilarityParams) -> None:
        super().__init__(params)
        self._encoder: Encoder | None = None
        self._vectors: dict[str, Any] = {}

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:  # loaded in the process that evaluates, on first use
            self._encoder = encoder(str(self.params._folder))
        return self._encoder

    def wants(self, event: RequestEvent) -> bool:
        return _sampled(event.id, self.params.sample_rate)

    def prepare(self, events: Sequence[RequestEvent]) -> None:
        texts = {t for e in events for t in (e.output, *e.targets())}
        self._vectors = {}
        if len(texts) > _CACHE_TEXTS:
            texts = set(list(texts)[:_CACHE_TEXTS])
        ordered = sorted(texts)
        self._vectors = dict(zip(ordered, self.encoder.encode_exact(ordered), strict=True))

    def batch_vectors(self, folder: str) -> dict[str, Any]:
        """The vectors of the last prepared batch by text, when the model is ``folder`` (else none):
        embedding drift reuses them (encode_exact: a text's vector does not depend on its batch)."""
        return self._vectors if str(self.params._folder) == folder else {}

    def _embed(self, texts: list[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        found = dict(zip(missing, self.encoder.encode_exact(missing), strict=True)) if missing else {}
        return [self._vectors[t] if t in self._vectors else found[t] for t in texts]

    def evaluate(self, event: RequestEvent) -> Score:
        targets = self.targets(event)
        output, *references = self._embed([event.output, *targets])
        cosines = [float(output @ ref) for ref in references]
        best = max(range(len(cosines)), key=cosines.__getitem__)
        cosine = cosines[best]
        passed = cosine >= self.params.threshold
        verdict = "at least" if passed else "below"
        return Score(
            min(1.0, max(0.0, cosine)),
            passed,
            f"semantic similarity {cosine:.3f} is {verdict} {self.params.threshold:g}",
            {"cosine": round(cosine, 6), "target": best},
        )
