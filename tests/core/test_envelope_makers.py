"""The cheaper makers of :mod:`streameval.envelope` give the objects the dataclasses' own __init__ gives."""

from __future__ import annotations

import dataclasses

import pytest

from streameval.envelope import Outcome, Source, line_source, result_outcome
from streameval.models import GradedResult


def test_a_line_source_is_the_source_init_makes() -> None:
    made, expected = line_source("file:events.jsonl", 7), Source("file:events.jsonl", None, 7)
    assert made == expected and hash(made) == hash(expected) and repr(made) == repr(expected)
    assert dataclasses.replace(made, item="x") == Source("file:events.jsonl", None, 7, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.offset = 8  # type: ignore[misc]


def test_a_result_outcome_is_the_outcome_init_makes() -> None:
    result = GradedResult.model_construct(id="e")
    for counters, notes in (
        ({"e": {"c": 1.0}}, {"turns": ("t",)}),
        (None, {}),
        ({}, {"a": 1, "b": None}),
    ):
        made = result_outcome(result, counters, notes)
        expected = Outcome(result=result, counters=counters, annotations=notes)
        assert made == expected and repr(made) == repr(expected)
        assert made.dead_letter is None and made.result is result and made.counters is counters
        assert made.annotations is notes
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.annotations = {}  # type: ignore[misc]
    assert Outcome().annotations == {}
