"""``keyword_match`` (the agent-metrics spec §准确率 data preparation) and window accuracy / precision / recall / F1.

The agent-metrics spec turns a text answer into a match label: the keyword sets of the output and of the
expected answer (lower case, stop words and one-character words removed) have a Jaccard >= 0.3. That label is
the *prediction*. The *truth* is the event's ``label`` (true: the output should match). The spec sets
both from the same flag, so its accuracy is always 1; here they are separate (docs/glossary.md).

Per event the evaluator reports one confusion-matrix cell as ``Score.counters`` (``tp``/``fp``/``fn``/
``tn``, value 1), which the Redis store adds into the window aggregate fields ``ev:{name}:c:{cell}``.
:func:`classification_stats` turns those summed cells into the window figures, binary and macro.

Keywords: the spec splits on ``\\b\\w+\\b``, which leaves a whole Chinese clause as one "word"; here CJK
text is segmented with rjieba first (see ``_lang.content_tokens``), so Chinese answers get real keywords.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register
from ._lang import content_tokens

__all__ = ["CELLS", "KeywordMatch", "classification_stats", "keyword_jaccard"]

#: the counter names keyword_match emits (one of them, value 1, per labelled event)
CELLS = ("tp", "fp", "fn", "tn")


def keyword_jaccard(a: str, b: str) -> float:
    """Jaccard of the two texts' keyword sets; 0.0 when both are empty (the agent-metrics spec:
    ``if union > 0 else 0``)."""
    sa, sb = set(content_tokens(a)), set(content_tokens(b))
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def _prf(tp: float, fp: float, fn: float) -> tuple[float, float, float]:
    # sklearn precision_recall_fscore_support(..., zero_division=0) for one class
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return precision, recall, f1


def classification_stats(counters: Mapping[str, float], *, evaluator: str | None = None) -> dict[str, float]:
    """Window figures from summed confusion cells ``tp``, ``fp``, ``fn``, ``tn`` (missing = 0).

    ``counters``: the cells by name, or — with ``evaluator`` set — an aggregate's hash fields, from which
    ``ev:{evaluator}:c:{cell}`` are read (``PairAggregate.fields``). Returns ``count``, ``accuracy`` =
    (tp + tn) / count, binary ``precision``/``recall``/``f1`` of the positive class (a match), and
    ``macro_precision``/``macro_recall``/``macro_f1``: the unweighted mean over the classes that occur in
    the truth or the predictions (sklearn ``average="macro"``, ``zero_division=0``). Every figure is 0.0
    on an empty window.
    """
    prefix = f"ev:{evaluator}:c:" if evaluator is not None else ""
    cells = {cell: float(counters.get(prefix + cell, 0.0)) for cell in CELLS}
    tp, fp, fn, tn = cells["tp"], cells["fp"], cells["fn"], cells["tn"]
    count = tp + fp + fn + tn
    precision, recall, f1 = _prf(tp, fp, fn)
    per_class = []
    if tp + fp + fn > 0:  # class 1 occurs in truth or prediction
        per_class.append((precision, recall, f1))
    if tn + fn + fp > 0:  # class 0 occurs; its tp is tn, its fp is fn, its fn is fp
        per_class.append(_prf(tn, fn, fp))
    k = len(per_class) or 1
    return {
        "count": count,
        "accuracy": (tp + tn) / count if count else 0.0,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "macro_precision": sum(c[0] for c in per_class) / k,
        "macro_recall": sum(c[1] for c in per_class) / k,
        "macro_f1": sum(c[2] for c in per_class) / k,
    }


class KeywordMatchParams(Params):
    threshold: float = Field(
        default=0.3, ge=0.0, le=1.0, description="keyword Jaccard for a match (default: 0.3)"
    )
    unlabeled: Literal["skip", "positive"] = Field(
        default="skip",
        description="events without label: skip (no confusion cell) or positive (the output is expected to match)",
    )


@register
class KeywordMatch(Evaluator):
    """Predicts "match" when the keyword Jaccard with a target is >= ``threshold`` (best target).

    Labelled event: score 1 when the prediction equals ``label``, else 0, plus one confusion cell; the
    window mean of the score is then the accuracy. Unlabelled event (``unlabeled: skip``): score 1 on a
    match, else 0, and only the counter ``unlabeled``.
    """

    name = "keyword_match"
    summary = "keyword-Jaccard match label; feeds window accuracy/precision/recall/F1"
    Params = KeywordMatchParams
    params: KeywordMatchParams

    def evaluate(self, event: RequestEvent) -> Score:
        jaccard = max(keyword_jaccard(event.output, t) for t in self.targets(event))
        predicted = jaccard >= self.params.threshold
        truth = event.label
        if truth is None and self.params.unlabeled == "positive":
            truth = True
        details: dict[str, object] = {"jaccard": jaccard, "match": predicted, "label": truth}
        verdict = f"keyword Jaccard {jaccard:.3f} {'>=' if predicted else '<'} {self.params.threshold:g}"
        if truth is None:
            return Score(float(predicted), predicted, verdict, details, {"unlabeled": 1.0})
        cell = ("tp" if truth else "fp") if predicted else ("fn" if truth else "tn")
        correct = predicted == truth
        details["cell"] = cell
        return Score(
            float(correct), correct, f"{verdict}; label {str(truth).lower()} -> {cell}", details, {cell: 1.0}
        )
