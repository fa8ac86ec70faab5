"""The alert metric human_agreement: the lowest kappa of the judges, the panel and the result, with min_labels."""

from __future__ import annotations

from streameval.alerts import AlertRule, figures, fires
from streameval.models import Aggregate, Agreement, AlertWindow, HumanAgreement

WINDOW = AlertWindow(size_s=60, start="2026-11-21T10:00:00Z", end="2026-11-21T10:01:00Z")


def aggregate(raters: dict[str, Agreement] | None) -> Aggregate:
    human = None if raters is None else HumanAgreement(labels=40, events=40, raters=raters)
    return Aggregate(
        model="m",
        suite="qa",
        window=WINDOW,
        count=50,
        mean=0.7,
        std=0.1,
        pass_rate=0.7,
        grades={},
        evaluators={},
        published_at="2026-11-21T10:01:02Z",
        human=human,
    )


def test_the_lowest_kappa_with_enough_labels_fires() -> None:
    rule = AlertRule(
        name="people", metric="human_agreement", comparator="<", threshold=0.4, window=60, min_labels=30
    )
    window = aggregate(
        {
            "judge:good": Agreement(n=40, n_pass=40, kappa=0.8),
            "judge:drifted": Agreement(n=40, n_pass=40, kappa=0.1),
            "judge:new": Agreement(n=5, n_pass=5, kappa=-0.5),  # too few labels to count
            "evaluator:exact_match": Agreement(n=40, n_pass=40, kappa=-0.9),  # rule evaluators do not count
        }
    )
    assert fires(rule, window) == 0.1
    assert fires(rule.model_copy(update={"min_labels": 3}), window) == -0.5
    assert fires(rule.model_copy(update={"threshold": 0.05}), window) is None
    assert fires(rule, aggregate(None)) is None  # no labels: never fires
    assert figures(window)["human_agreement"] == 0.1  # the alert's figures use the default min_labels (30)
