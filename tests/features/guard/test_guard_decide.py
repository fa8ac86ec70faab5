"""The decision rule as a function (streameval.features.guard.decide): invariants over any score, band and
evaluator verdicts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streameval.features.guard import GuardConfig, decide
from streameval.models import EvaluatorResult, GradedResult

SEVERITY = {"allow": 0, "warn": 1, "block": 2}
NAMES = ("a", "b", "c")


def _result(score: float, passed: dict[str, bool], threshold: float = 0.6) -> GradedResult:
    evaluators = [
        EvaluatorResult(name=n, score=float(ok), passed=ok, weight=1.0, reason=f"{n} said so")
        for n, ok in passed.items()
    ]
    return GradedResult.model_construct(score=score, threshold=threshold, evaluators=evaluators)


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
verdicts = st.fixed_dictionaries({n: st.booleans() for n in NAMES})
names = st.lists(st.sampled_from(NAMES), unique=True)


@st.composite
def guards(draw: st.DrawFn) -> GuardConfig:
    block = draw(st.none() | unit)
    warn = draw(st.none() | unit)
    if block is not None and warn is not None and warn < block:
        block, warn = warn, block
    return GuardConfig(
        block_below=block, warn_below=warn, block_on=draw(st.none() | names), warn_on=draw(names)
    )


@given(guards(), unit, unit, verdicts, names)
def test_a_lower_score_is_never_a_milder_decision(
    guard: GuardConfig, first: float, second: float, passed: dict[str, bool], gates: list[str]
) -> None:
    low, high = sorted((first, second))
    at_low = decide(_result(low, passed), guard, gates).decision
    at_high = decide(_result(high, passed), guard, gates).decision
    assert SEVERITY[at_low] >= SEVERITY[at_high]


@given(guards(), unit, verdicts, names)
def test_a_failing_evaluator_is_never_a_milder_decision(
    guard: GuardConfig, score: float, passed: dict[str, bool], gates: list[str]
) -> None:
    for name in NAMES:
        worse = {**passed, name: False}
        assert (
            SEVERITY[decide(_result(score, worse), guard, gates).decision]
            >= SEVERITY[decide(_result(score, passed), guard, gates).decision]
        )


@given(guards(), unit, verdicts, names)
def test_only_allow_has_no_reason_and_each_reason_names_a_cause(
    guard: GuardConfig, score: float, passed: dict[str, bool], gates: list[str]
) -> None:
    verdict = decide(_result(score, passed), guard, gates)
    assert (verdict.decision == "allow") == (verdict.reasons == ())
    for reason in verdict.reasons:
        assert reason.startswith("score ") or reason.split(" failed: ")[0] in NAMES


@given(unit, verdicts, names)
def test_without_section_keys_it_blocks_exactly_what_the_stream_fails(
    score: float, passed: dict[str, bool], gates: list[str]
) -> None:
    result = _result(score, passed)
    stream_passes = score >= result.threshold and all(passed[g] for g in gates)
    assert (decide(result, GuardConfig(), gates).decision == "allow") == stream_passes
