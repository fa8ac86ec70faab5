"""ROUGE-L (the agent-metrics spec §ROUGE-L): longest-common-subsequence precision, recall and F1 over word tokens.

The LCS length comes from ``rapidfuzz.distance.LCSseq`` (C++, bit-parallel) instead of the spec's
O(m·n) Python table; bench/metrics.py measures the difference. Tokens are CJK-aware by default (one
token per CJK character, otherwise runs of letters and digits, case-folded); on ASCII text this is
rouge-score's default tokenizer without stemming. ``tokenize: whitespace`` is the spec's
``text.lower().split()``.

Several references: the agent-metrics spec keeps the reference with the best *recall* (``select: recall``,
default); rouge-score's ``score_multi`` keeps the best *F1* (``select: f1``). Ties keep the first reference,
as both. An empty output or reference scores 0 against it (rouge-score and the spec agree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field
from rapidfuzz.distance import LCSseq

from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register
from ._lang import cjk_tokens

__all__ = ["LcsScore", "RougeL", "lcs_score", "rouge_l"]


@dataclass(frozen=True, slots=True)
class LcsScore:
    precision: float
    recall: float
    f1: float
    lcs: int


def lcs_score(prediction: Sequence[str], target: Sequence[str]) -> LcsScore:
    """ROUGE-L of two token lists; 0 when either is empty (rouge-score ``_score_lcs``)."""
    if not prediction or not target:
        return LcsScore(0.0, 0.0, 0.0, 0)
    lcs = int(LCSseq.similarity(prediction, target))
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return LcsScore(precision, recall, f1, lcs)


def _whitespace(text: str) -> list[str]:
    return text.lower().split()


_TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"cjk": cjk_tokens, "whitespace": _whitespace}


def rouge_l(
    prediction: str,
    targets: Sequence[str],
    *,
    select: Literal["recall", "f1"] = "recall",
    tokenize: Literal["cjk", "whitespace"] = "cjk",
) -> tuple[LcsScore, int]:
    """The chosen reference's ROUGE-L and its index (``-1`` when there is no reference)."""
    split = _TOKENIZERS[tokenize]
    pred = split(prediction)
    best, best_index = LcsScore(0.0, 0.0, 0.0, 0), -1
    for index, target in enumerate(targets):
        score = lcs_score(pred, split(target))
        key = score.recall if select == "recall" else score.f1
        if best_index < 0 or key > (best.recall if select == "recall" else best.f1):
            best, best_index = score, index
    return best, best_index


class RougeLParams(Params):
    select: Literal["recall", "f1"] = Field(
        default="recall",
        description="reference kept when there are several: best recall or best F1 (rouge-score)",
    )
    tokenize: Literal["cjk", "whitespace"] = Field(
        default="cjk",
        description="cjk = one token per CJK character, letter/digit runs otherwise; whitespace = str.split() as in the agent-metrics spec",
    )
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this F1")


@register
class RougeL(Evaluator):
    """ROUGE-L F1 of ``output`` against the selected target; precision and recall in ``details``."""

    name = "rouge_l"
    summary = "ROUGE-L (LCS) precision/recall/F1, CJK-aware"
    Params = RougeLParams
    params: RougeLParams

    def evaluate(self, event: RequestEvent) -> Score:
        score, index = rouge_l(
            event.output, self.targets(event), select=self.params.select, tokenize=self.params.tokenize
        )
        return Score(
            score.f1,
            score.f1 >= self.params.threshold,
            f"ROUGE-L F1 {score.f1:.3f} (precision {score.precision:.3f}, recall {score.recall:.3f})",
            {"precision": score.precision, "recall": score.recall, "lcs": score.lcs, "target": index},
        )
