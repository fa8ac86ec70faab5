"""Grades (the multi-judge spec's levels, the report-quality spec's letters) and the weighted combination."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streameval.grading import combine, grade


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (1.0, "excellent"),
        (0.9, "excellent"),
        (0.8999, "good"),
        (0.75, "good"),
        (0.7499, "pass"),
        (0.6, "pass"),
        (0.5999, "fail"),
        (0.3, "fail"),
        (0.2999, "severe_defect"),
        (0.0, "severe_defect"),
    ],
)
def test_seed_003_levels(score: float, level: str) -> None:
    assert grade(score, "levels") == level


@pytest.mark.parametrize(
    ("score", "letter"),
    [
        (0.95, "A+"),
        (0.9, "A+"),
        (0.894, "A"),
        (0.85, "A"),
        (0.84, "A-"),
        (0.8, "A-"),
        (0.79, "B+"),
        (0.75, "B+"),
        (0.72, "B"),
        (0.65, "B-"),
        (0.6, "C+"),
        (0.55, "C"),
        (0.5, "C-"),
        (0.45, "D"),
        (0.4, "D"),
        (0.399, "F"),
        (0.0, "F"),
    ],
)
def test_seed_000_letters(score: float, letter: str) -> None:
    assert grade(score, "letters") == letter  # the report-quality spec: 8.94 is an A (its worked example)


def test_combine_is_the_weighted_mean() -> None:
    assert combine([(1.0, 1.0), (0.0, 3.0)]) == 0.25
    assert combine([(0.5, 2.0)]) == 0.5
    assert combine([]) == 0.0  # no weight: nothing shown to pass
    assert combine([(1.0, 0.0)]) == 0.0


pairs = st.lists(st.tuples(st.floats(0, 1), st.floats(0.001, 100)), min_size=1, max_size=12)


@given(pairs)
def test_combined_score_stays_in_unit_interval(scored: list[tuple[float, float]]) -> None:
    assert 0.0 <= combine(scored) <= 1.0


@given(pairs, st.randoms())
def test_order_of_evaluators_does_not_matter(scored: list[tuple[float, float]], rng: object) -> None:
    shuffled = list(scored)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert combine(shuffled) == pytest.approx(combine(scored), abs=1e-12)


@given(pairs, st.floats(0.01, 1000))
def test_scaling_all_weights_changes_nothing(scored: list[tuple[float, float]], k: float) -> None:
    assert combine([(s, w * k) for s, w in scored]) == pytest.approx(combine(scored), abs=1e-9)
