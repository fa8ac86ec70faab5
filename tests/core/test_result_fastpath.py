"""The pipeline's cheap result path writes exactly what the validating path wrote.

Rule results and graded results of suites without a judge panel are built without a second pydantic
validation when their values already have the field types (:func:`streameval.result_build._built_result`,
``built_graded``); anything else is validated as before. Here both
paths run on the example events and the text-metric corpus, with a fixed clock, and every line of the
results and dead-letter files must be byte-identical (timing fields included: the clock is fixed).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from metrics_corpus import multi_reference, text_pairs
from pydantic import ValidationError

from streameval import pipeline as pipeline_module
from streameval import result_build
from streameval.config import BoundEvaluator, parse_config_text
from streameval.evaluators import Score, build_evaluator
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
CLOCK = 1_764_000_000.25

RULES: dict[str, Any] = {
    "suites": [
        {
            "name": "rules",
            "default": True,
            "threshold": 0.5,
            "evaluators": [
                {"evaluator": "exact_match"},
                {"evaluator": "exact_match_normalized"},
                {"evaluator": "contains"},
                {"evaluator": "contains", "name": "contains_ci", "params": {"ignore_case": True}},
                {"evaluator": "regex", "params": {"pattern": "模型|the", "flags": "i"}},
                {"evaluator": "json_schema", "params": {"schema": {"type": "object", "required": ["a"]}}},
                {"evaluator": "similarity"},
                {"evaluator": "similarity", "name": "cos", "params": {"algorithm": "cosine"}},
                {"evaluator": "token_f1"},
                {"evaluator": "rouge_l"},
                {"evaluator": "bleu"},
                {"evaluator": "bleu_simple"},
                {
                    "evaluator": "keyword_match",
                    "params": {"unlabeled": "positive"},
                    "gate": True,
                    "weight": 0,
                },
            ],
        }
    ]
}


def _corpus() -> bytes:
    lines = []
    for i, (output, expected) in enumerate(text_pairs()):
        event: dict[str, Any] = {"id": f"p{i}", "model": f"m{i % 3}", "output": output, "expected": expected}
        if i % 7 == 0:
            event["output"] = orjson.dumps({"a": output} if i % 2 else [output]).decode()
        if i % 11 == 0:
            event["timestamp"] = "2026-11-21T10:00:00.5+02:00"
        lines.append(orjson.dumps(event))
    for i, (output, references) in enumerate(multi_reference()):
        lines.append(orjson.dumps({"id": f"r{i}", "model": "m", "output": output, "references": references}))
    lines.append(orjson.dumps({"id": "no-target", "model": "m", "output": "x"}))  # error results
    lines.append(b"{not json")  # a dead letter
    lines.append(lines[3])  # a repeated id
    return b"\n".join(lines) + b"\n"


def _validated(
    name: str,
    score: float,
    passed: bool,
    weight: float,
    reason: str | None,
    details: dict[str, Any] | None,
    version: str | None,
) -> EvaluatorResult:
    """The code the cheap path replaced: every result validated by pydantic."""
    return EvaluatorResult(
        name=name, score=score, passed=passed, weight=weight, reason=reason, details=details, version=version
    )


def _counted(build: Callable[..., Any], calls: dict[str, int], key: str) -> Callable[..., Any]:
    def counted(*args: Any) -> Any:
        calls[key] += 1
        return build(*args)

    return counted


def _run(config_text: str, events: Path, out_dir: Path) -> tuple[bytes, bytes]:
    suites = parse_config_text(config_text, file="<test>")[1]
    out, dead = out_dir / "results.jsonl", out_dir / "dead.jsonl"
    asyncio.run(evaluate_file(Pipeline(suites, clock=lambda: CLOCK), events, out, dead, concurrency=16))
    return out.read_bytes(), dead.read_bytes()


@pytest.mark.parametrize("corpus", ["examples", "metrics"])
def test_results_and_dead_letters_are_byte_identical_to_the_validating_path(
    corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if corpus == "examples":
        config_text, events = (
            (ROOT / "examples" / "suites.yaml").read_text("utf-8"),
            ROOT / "examples" / "events.jsonl",
        )
    else:
        config_text, events = yaml.safe_dump(RULES, allow_unicode=True), tmp_path / "corpus.jsonl"
        events.write_bytes(_corpus())
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    cheap = {"results": 0, "graded": 0}
    for module, name, key in (
        (result_build, "_built_result", "results"),
        (result_build, "built_graded", "graded"),
    ):
        monkeypatch.setattr(module, name, _counted(getattr(module, name), cheap, key))
    new = _run(config_text, events, tmp_path / "new")
    assert cheap["results"] > 500 and cheap["graded"] > 150  # the cheap path is the one taken
    monkeypatch.setattr(result_build, "_built_result", _validated)
    monkeypatch.setattr(result_build, "built_graded", lambda values: GradedResult(**values))
    old = _run(config_text, events, tmp_path / "old")
    assert new[0].count(b"\n") > 200 and new[0] == old[0]
    assert new[1] == old[1]
    if corpus == "examples":
        assert new[1].count(b"\n") > 0


BOUND = BoundEvaluator("e", 2.0, build_evaluator("exact_match", {}))


class _Str(str):
    pass


@pytest.mark.parametrize(
    "score",
    [
        Score(1.0, True),
        Score(0.25, False, "why", {"k": [1, {"x": None}]}, None, "v@2"),
        Score(0.0, False, None, {}),
        Score(1, True),
        Score(True, True),
        Score(0.5, 1),
        Score(0.5, True, _Str("r")),
        Score(0.5, True, None, {1: "x"}),  # type: ignore[arg-type]
        Score(1.5, True),
        Score(math.nan, True),
        Score(-0.0, False),
        Score(0.5, True, 3),  # type: ignore[arg-type]
    ],
)
def test_a_rule_result_is_what_validation_builds_or_raises(score: Score) -> None:
    def old() -> EvaluatorResult:
        if not 0.0 <= score.score <= 1.0:
            return EvaluatorResult(
                name="e",
                score=0.0,
                passed=False,
                weight=2.0,
                reason=f"evaluator returned score {score.score!r} outside [0, 1]",
                error="bad_score",
            )
        return _validated("e", score.score, score.passed, 2.0, score.reason, score.details, score.version)

    built: Callable[[], EvaluatorResult] = lambda: result_build.to_result(BOUND, score)  # noqa: E731
    try:
        expected = old()
    except ValidationError as exc:
        with pytest.raises(ValidationError) as raised:
            built()
        assert str(raised.value) == str(exc)
        return
    got = built()
    assert got == expected and got.model_fields_set == expected.model_fields_set
    assert (
        got.model_dump_json() == expected.model_dump_json() and got.__getstate__() == expected.__getstate__()
    )
    if score.details is not None:
        assert got.details is not score.details  # copied, as validation copies a dict


def test_graded_results_built_without_validation_equal_validated_ones(tmp_path: Path) -> None:
    suites = parse_config_text(yaml.safe_dump(RULES, allow_unicode=True), file="<test>")[1]
    pipeline = Pipeline(suites, clock=lambda: CLOCK)
    checked = 0
    for raw in _corpus().splitlines()[:300]:
        outcome = pipeline.process_sync(raw, pipeline_module.Source(), CLOCK - 0.5)
        assert outcome is not None
        if outcome.result is None:
            continue
        got = outcome.result
        values = {name: getattr(got, name) for name in got.model_fields_set}
        expected = GradedResult(**values)
        assert got == expected and got.model_fields_set == expected.model_fields_set
        assert got.__getstate__() == expected.__getstate__() and repr(got) == repr(expected)
        checked += 1
    assert checked > 250


def test_format_time_writes_what_datetime_writes() -> None:
    from datetime import UTC, datetime

    rng = random.Random(3)
    edges = [
        0.0,
        -0.0,
        1.0005,
        1.0004999,
        1764000000.9999996,
        1764000000.9999995,
        1764000000.9999994,
        -1.5,
        -0.0000004,
        -0.0000005,
        -0.0000006,
        253402300799.999,
        1e-7,
        5e-7,
        -62135596800.0,
    ]
    near = [
        1764000000 + k / 1e6 + d for k in range(0, 2_000_000, 37) for d in (0.0, 4.9999e-7, 5e-7, 5.0001e-7)
    ]
    times = edges + near + [rng.uniform(-6e10, 2.5e11) for _ in range(50_000)]
    for epoch in times:
        expected = (
            datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
        assert format_time(epoch) == expected, epoch
    for bad in (math.nan, math.inf, 1e20):
        with pytest.raises((ValueError, OverflowError, OSError)):
            format_time(bad)


def test_remembered_routes_equal_routing_each_event_afresh() -> None:
    from streameval.config import Suites
    from streameval.errors import EventError

    suites = parse_config_text((ROOT / "examples" / "suites.yaml").read_text("utf-8"), file="<test>")[1]
    pipeline = Pipeline(suites)
    lines = (ROOT / "examples" / "events.jsonl").read_bytes().splitlines()
    routed = 0
    for raw in lines * 2:  # the second pass is served from the remembered routes
        try:
            event = pipeline.decode(raw)
        except EventError:
            continue
        fresh = Suites(suites.all)  # nothing remembered
        for variant in (event, event.model_copy(update={"suite": None})):
            try:
                expected = fresh.route(variant).name
            except EventError as exc:
                with pytest.raises(type(exc)):
                    suites.route(variant)
                continue
            assert suites.route(variant).name == expected
            routed += 1
    assert routed > 300 and suites._routes
