"""The agent-metrics spec's agent metrics: collaboration efficiency, portability, adaptability (per-domain counters)."""

from __future__ import annotations

from typing import Any

import pytest
from _support import event as request_event

from streameval.evaluators import MissingField, build_evaluator
from streameval.evaluators.agent import adaptability_from_counters, domain_means
from streameval.models import RequestEvent


def _event(**agent: Any) -> RequestEvent:
    return request_event(id="a", agent=agent)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (
            {"task_quality": 0.9, "communication_rounds": 3, "task_time": 10.0},
            0.9 / 31,
        ),  # the spec's example fields
        ({"task_quality": 1.0, "communication_rounds": 0, "task_time": 5.0}, 1.0),
        ({"task_quality": 0.8, "communication_rounds": 2, "task_time": 0}, 0.0),  # spec: time 0 -> 0
    ],
)
def test_collaboration_efficiency(agent: dict[str, Any], expected: float) -> None:
    assert build_evaluator("collaboration_efficiency").evaluate(_event(**agent)).score == pytest.approx(
        expected
    )


@pytest.mark.parametrize(
    ("original", "transferred", "expected", "loss"),
    [
        (0.9, 0.85, 1 - (0.9 - 0.85) / 0.9, (0.9 - 0.85) / 0.9),  # the spec's example
        (0.8, 0.0, 0.0, 1.0),
        (0.5, 0.8, 1.0, -0.6),  # improvement: clamped to 1, raw loss kept
        (0.0, 0.5, 0.0, 1.0),  # spec: original 0 -> 0
    ],
)
def test_portability(original: float, transferred: float, expected: float, loss: float) -> None:
    score = build_evaluator("portability").evaluate(
        _event(original_score=original, transferred_score=transferred)
    )
    assert score.score == pytest.approx(expected)
    assert (score.details or {})["performance_loss"] == pytest.approx(loss)


def test_adaptability_event_and_window() -> None:
    ev = build_evaluator("adaptability")
    first = ev.evaluate(
        _event(results=[{"domain": "技术问答", "score": 0.85}, {"domain": "文学创作", "score": 0.72}])
    )
    assert first.score == pytest.approx((0.85 + 0.72) / 2)  # the spec's example
    second = ev.evaluate(_event(results=[{"domain": "技术问答", "score": 0.55}]))
    third = ev.evaluate(_event(results=[{"domain": "技术问答", "score": 0.65}]))
    window: dict[str, float] = {}
    for score in (first, second, third):  # what the store's HINCRBYFLOAT does
        for key, value in (score.counters or {}).items():
            window[f"ev:adaptability:c:{key}"] = window.get(f"ev:adaptability:c:{key}", 0.0) + value
    means = domain_means(window, evaluator="adaptability")
    assert means == pytest.approx({"技术问答": (0.85 + 0.55 + 0.65) / 3, "文学创作": 0.72})
    assert adaptability_from_counters(window, evaluator="adaptability") == pytest.approx(
        ((0.85 + 0.55 + 0.65) / 3 + 0.72) / 2
    )
    assert adaptability_from_counters({}) == 0.0


@pytest.mark.parametrize(
    ("name", "agent", "missing"),
    [
        ("collaboration_efficiency", {"task_quality": 0.5}, "communication_rounds"),
        ("portability", {"original_score": 0.5}, "transferred_score"),
        ("adaptability", {}, "results"),
    ],
)
def test_missing_fields_are_named(name: str, agent: dict[str, Any], missing: str) -> None:
    with pytest.raises(MissingField, match=missing):
        build_evaluator(name).evaluate(_event(**agent))
    with pytest.raises(MissingField, match="no agent block"):
        build_evaluator(name).evaluate(RequestEvent(id="a", model="m", output=""))
