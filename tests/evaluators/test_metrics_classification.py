"""keyword_match (the agent-metrics spec's match labels) and the window accuracy / precision / recall / F1 figures."""

from __future__ import annotations

from collections import Counter

import pytest
from _support import event as request_event
from hypothesis import given
from hypothesis import strategies as st

from streameval.evaluators import build_evaluator
from streameval.evaluators.classification import classification_stats, keyword_jaccard
from streameval.models import RequestEvent


def _event(output: str, expected: str, label: bool | None = None) -> RequestEvent:
    return request_event(id="k", output=output, expected=expected, label=label)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Paris is the capital of France", "The capital of France is Paris", 1.0),
        ("machine learning model", "deep learning model", 0.5),  # {machine, learning, model} vs {deep, ...}
        ("a b c", "x y z", 0.0),  # one-character words are dropped: both sets empty -> 0 (the spec)
        ("北京是中国的首都", "中国的首都是北京", 1.0),  # rjieba words, stop words 的/是 dropped
        ("北京大学", "清华大学", 0.0),
    ],
)
def test_keyword_jaccard(a: str, b: str, expected: float) -> None:
    assert keyword_jaccard(a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("output", "label", "cell", "score"),
    [
        ("Paris is the capital of France", True, "tp", 1.0),
        ("Paris is the capital of France", False, "fp", 0.0),
        ("I do not know", True, "fn", 0.0),
        ("I do not know", False, "tn", 1.0),
    ],
)
def test_confusion_cells_from_label(output: str, label: bool, cell: str, score: float) -> None:
    result = build_evaluator("keyword_match").evaluate(
        _event(output, "The capital of France is Paris", label)
    )
    assert result.counters == {cell: 1.0}
    assert result.score == score and result.passed == bool(score)


def test_unlabelled_events_skip_or_count_as_positive() -> None:
    event = _event("I do not know", "The capital of France is Paris")
    assert build_evaluator("keyword_match").evaluate(event).counters == {"unlabeled": 1.0}
    assert build_evaluator("keyword_match", {"unlabeled": "positive"}).evaluate(event).counters == {"fn": 1.0}


def _reference(truth: list[int], pred: list[int]) -> dict[str, float]:
    """Accuracy and sklearn-style binary / macro precision, recall and F1 (zero_division=0), from lists."""

    def prf(cls: int) -> tuple[float, float, float]:
        tp = sum(1 for t, p in zip(truth, pred, strict=True) if t == cls and p == cls)
        n_pred = sum(1 for p in pred if p == cls)
        n_true = sum(1 for t in truth if t == cls)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_true if n_true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    classes = sorted(set(truth) | set(pred))
    macro = [prf(c) for c in classes]
    p, r, f = prf(1)
    k = len(classes) or 1
    return {
        "count": len(truth),
        "accuracy": sum(t == q for t, q in zip(truth, pred, strict=True)) / len(truth) if truth else 0.0,
        "precision": p,
        "recall": r,
        "f1": f,
        "macro_precision": sum(m[0] for m in macro) / k,
        "macro_recall": sum(m[1] for m in macro) / k,
        "macro_f1": sum(m[2] for m in macro) / k,
    }


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=60))
def test_stats_equal_the_definitions(rows: list[tuple[int, int]]) -> None:
    truth = [t for t, _ in rows]
    pred = [p for _, p in rows]
    names = {(1, 1): "tp", (0, 1): "fp", (1, 0): "fn", (0, 0): "tn"}
    cells = Counter(names[row] for row in rows)
    assert classification_stats(dict(cells)) == pytest.approx(_reference(truth, pred))


def test_stats_read_an_aggregate_and_accuracy_is_not_always_one() -> None:
    fields = {
        "count": 10.0,
        "ev:km:c:tp": 3.0,
        "ev:km:c:fp": 1.0,
        "ev:km:c:fn": 2.0,
        "ev:km:c:tn": 4.0,
        "ev:other:c:tp": 100.0,
    }
    stats = classification_stats(fields, evaluator="km")
    assert stats["count"] == 10 and stats["accuracy"] == pytest.approx(0.7)
    assert stats["precision"] == pytest.approx(0.75) and stats["recall"] == pytest.approx(0.6)
    assert classification_stats({})["accuracy"] == 0.0
