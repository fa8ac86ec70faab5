"""Answer metrics of the RAG-evaluation spec §2.1-2.2: ``exact_match_normalized`` and ``token_f1``.

Both compare ``output`` with the event's targets (``expected``, else every reference; the best one
counts) after :func:`~._lang.normalize_answer` (SQuAD normalisation + full-width forms + CJK punctuation).
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Literal

from pydantic import Field

from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register
from ._lang import answer_tokens, normalize_answer, squad_tokens
from .fallback import LLMFallback

__all__ = ["ExactMatchNormalized", "TokenF1", "partial_credit", "squad_f1", "token_f1"]


def partial_credit(jaccard: float, partial_from: float) -> float:
    """The RAG-evaluation spec §2.1 "相似度高时给予0.7-1.0分": map a token-set Jaccard in ``[partial_from, 1]``
    linearly onto ``[0.7, 1.0]``; below ``partial_from`` the rule gives 0 (the spec hands that band to
    the LLM). With the default ``partial_from = 0.7`` the mapping is the identity: the score *is* the
    Jaccard. A Jaccard of 1 without an exact match (same words, other order or repetition) scores 1.0.
    """
    if jaccard < partial_from:
        return 0.0
    if partial_from >= 1.0:
        return 1.0
    return 0.7 + 0.3 * (jaccard - partial_from) / (1.0 - partial_from)


class ExactMatchParams(Params):
    partial_from: float = Field(
        default=0.7, ge=0.0, le=1.0, description="Jaccard at which partial credit (0.7) starts; 1 disables it"
    )
    threshold: float = Field(default=1.0, ge=0.0, le=1.0, description="pass at or above this score")
    chinese: Literal["words", "chars"] = Field(
        default="words",
        description="CJK tokens for the Jaccard: rjieba words (stop words dropped) or characters",
    )


@register
class ExactMatchNormalized(Evaluator):
    """1.0 when the normalised output equals a normalised target; otherwise the RAG-evaluation spec's partial
    credit from the Jaccard of the normalised token sets (see :func:`partial_credit`). Max over targets."""

    name = "exact_match_normalized"
    summary = "normalised exact match with Jaccard partial credit"
    Params = ExactMatchParams
    params: ExactMatchParams
    # the RAG-evaluation spec's table: "不完全匹配且内容相似度一般" — the LLM judges the band below partial credit.
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("below", 0.7, note="neither exact nor partial credit")

    def evaluate(self, event: RequestEvent) -> Score:
        out = normalize_answer(event.output)
        out_set = set(squad_tokens(out, chinese=self.params.chinese))
        best, best_j, best_index, exact = 0.0, 0.0, 0, False
        for index, target in enumerate(self.targets(event)):
            norm = normalize_answer(target)
            if norm == out:
                best, best_j, best_index, exact = 1.0, 1.0, index, True
                break
            tgt_set = set(squad_tokens(norm, chinese=self.params.chinese))
            union = out_set | tgt_set
            j = len(out_set & tgt_set) / len(union) if union else 1.0
            score = partial_credit(j, self.params.partial_from)
            if (score, j) > (best, best_j):
                best, best_j, best_index = score, j, index
        passed = best >= self.params.threshold
        reason = (
            "normalised output equals the target"
            if exact
            else f"token Jaccard {best_j:.3f} -> score {best:.3f}"
        )
        return Score(best, passed, reason, {"exact": exact, "jaccard": best_j, "target": best_index})


def squad_f1(pred: list[str], gold: list[str]) -> tuple[float, float, float]:
    """SQuAD v1.1 token F1 as (precision, recall, f1); two empty token lists score 1, one empty 0."""
    if not pred or not gold:
        same = float(pred == gold)
        return same, same, same
    # the size of the multiset intersection, looked up per distinct predicted token (Counter & is slower)
    gold_get = Counter(gold).get
    same = 0
    for token, count in Counter(pred).items():
        gold_count = gold_get(token)
        if gold_count:
            same += count if count < gold_count else gold_count
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return precision, recall, 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, target: str, *, chinese: str = "words") -> tuple[float, float, float]:
    """(precision, recall, f1) of two raw texts: normalise, tokenise (:func:`~._lang.squad_tokens`), F1."""
    return squad_f1(answer_tokens(prediction, chinese=chinese), answer_tokens(target, chinese=chinese))


class TokenF1Params(Params):
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this F1")
    chinese: Literal["words", "chars"] = Field(
        default="words",
        description="CJK tokens: rjieba words minus stop words (character fallback when none is left), or characters",
    )


@register
class TokenF1(Evaluator):
    """The RAG-evaluation spec §2.2: SQuAD token F1; Chinese segmented with rjieba and stop words
    (stopwordsiso) removed, with a per-character fallback; English and mixed text as in SQuAD. Max over
    targets."""

    name = "token_f1"
    summary = "SQuAD token F1, Chinese-aware"
    Params = TokenF1Params
    params: TokenF1Params
    # the RAG-evaluation spec's table: "无论F1分数如何" — the LLM is always asked; the final score is the max.
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("always")

    def evaluate(self, event: RequestEvent) -> Score:
        out = answer_tokens(event.output, chinese=self.params.chinese)
        best = (-1.0, 0.0, 0.0, 0)
        for index, target in enumerate(self.targets(event)):
            p, r, f = squad_f1(out, answer_tokens(target, chinese=self.params.chinese))
            if f > best[0]:
                best = (f, p, r, index)
        f1, precision, recall, index = best
        return Score(
            f1,
            f1 >= self.params.threshold,
            f"token F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f})",
            {"precision": precision, "recall": recall, "target": index},
        )
