"""``encode_result`` writes exactly the bytes of ``model_dump_json`` (the graded result's wire format).

Checked on the corpora of the result fast-path test (the example events with their suites, the
text-metric corpus with thirteen evaluators), on the documents of the contract tests, and on edge
values: every control character and some non-ASCII text in strings, floats from subnormal to huge
(non-finite ones in details), details nesting lists, tuples and dicts, the optional version marks
set and unset. What orjson would write differently or refuses (dates, sets, bytes, subclasses,
non-string keys, integers beyond 64 bits, a model whose dictionary is not exactly its fields) must take
pydantic's path, so the bytes stay the same there too. Judged results: tests/judges/test_judges_fastpath.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import importlib.util
import math
import random
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from streameval import models
from streameval.config import load_config, parse_config_text
from streameval.models import EvaluatorResult, GradedResult, JudgeBlock, encode_result
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline, Source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _fastpath_module() -> Any:
    """tests/core/test_result_fastpath.py, for its corpus and suites (test modules are no package)."""
    spec = importlib.util.spec_from_file_location(
        "_fastpath_corpus", Path(__file__).with_name("test_result_fastpath.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same(result: GradedResult) -> bytes:
    encoded = encode_result(result)
    assert encoded == result.model_dump_json().encode()
    return encoded


def _results(config_text: str, lines: list[bytes]) -> list[GradedResult]:
    suites = parse_config_text(config_text, file="<test>")[1]
    pipeline = Pipeline(suites, clock=lambda: 1_764_000_000.25)
    out = []
    for raw in lines:
        outcome = pipeline.process_sync(raw, Source(), 1_764_000_000.0)
        if outcome is not None and outcome.result is not None:
            out.append(outcome.result)
    return out


@pytest.mark.parametrize("corpus", ["examples", "metrics"])
def test_the_fast_path_corpora_encode_byte_for_byte(corpus: str) -> None:
    if corpus == "examples":
        config_text = (EXAMPLES / "suites.yaml").read_text("utf-8")
        lines = (EXAMPLES / "events.jsonl").read_bytes().splitlines()
    else:
        fastpath = _fastpath_module()
        config_text = yaml.safe_dump(fastpath.RULES, allow_unicode=True)
        lines = fastpath._corpus().splitlines()
    results = _results(config_text, lines)
    assert len(results) > (30 if corpus == "examples" else 500)
    for result in results:
        _same(result)


def test_the_evaluate_command_writes_the_contract_documents_as_before(tmp_path: Path) -> None:
    """The contract tests' documents: the example events through ``evaluate_file`` (which now encodes
    with ``encode_result``), each line equal to pydantic's encoding of the result it parses back to."""
    _, suites = load_config(EXAMPLES / "suites.yaml")
    asyncio.run(
        evaluate_file(
            Pipeline(suites), EXAMPLES / "events.jsonl", tmp_path / "out.jsonl", tmp_path / "dl.jsonl"
        )
    )
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(lines) > 30
    for line in lines:
        assert GradedResult.model_validate_json(line).model_dump_json().encode() == line


def _result(**changes: Any) -> GradedResult:
    evaluator = {
        "name": "e",
        "score": 0.5,
        "passed": True,
        "weight": 1.0,
        "reason": None,
        "details": None,
        "error": None,
        "version": None,
    }
    values: dict[str, Any] = {
        "id": "a",
        "model": "m",
        "suite": "s",
        "category": None,
        "score": 0.5,
        "passed": True,
        "threshold": 0.5,
        "grade": "pass",
        "evaluators": [EvaluatorResult(**{**evaluator, **changes.pop("evaluator", {})})],
        "event_time": "2026-11-21T10:00:00.500Z",
        "evaluated_at": "2026-11-21T10:00:01.000Z",
        "latency_ms": 12.5,
        "pipeline_version": "1.2.3",
    }
    return GradedResult(**{**values, **changes})


def _floats() -> list[float]:
    rng = random.Random(7)
    values = [
        0.0,
        -0.0,
        1.0,
        0.1,
        0.5,
        1 / 3,
        2 / 3,
        1e-7,
        1e-5,
        1e-4,
        1.5e-10,
        5e-324,
        2.2250738585072014e-308,
    ]
    values += [1e15, 1e16, 1e17, 1.5e22, 1e300, 1.7976931348623157e308, 123456789.125, 9007199254740993.0]
    values += [rng.random() for _ in range(300)]
    values += [rng.random() * 10.0 ** rng.randint(-30, 30) for _ in range(300)]
    values += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(300)]
    return [v for v in values if math.isfinite(v)]


def test_floats_are_written_as_pydantic_writes_them() -> None:
    unit = [v for v in _floats() if 0.0 <= v <= 1.0]
    for value in unit:
        _same(_result(score=value, threshold=value, evaluator={"score": value}))
    for value in _floats():
        _same(
            _result(
                latency_ms=abs(value),
                evaluator={"weight": abs(value), "details": {"x": value, "y": [-value]}},
            )
        )
    # non-finite floats in details: null, both ways
    _same(_result(evaluator={"details": {"nan": math.nan, "inf": [math.inf, -math.inf]}}))


def test_strings_are_escaped_as_pydantic_escapes_them() -> None:
    every_ascii = "".join(chr(c) for c in range(128))
    texts = [
        every_ascii,
        '"quoted" \\ back/slash',
        "模型 answers 日本語 🙂 é \u2028 \u2029 \ufeff \x7f",
        "\u0000\u001f\u0085",
        "",
    ]
    for text in texts:
        _same(
            _result(id=text, grade=text, reason=text, evaluator={"reason": text, "details": {text: [text]}})
        )


def test_details_and_marks_in_every_shape() -> None:
    details = [
        {},
        {"a": None, "b": True, "c": False, "d": 0, "e": -(2**63), "f": 2**64 - 1, "g": 1.0},
        {"nested": {"list": [1, [2, [3, {"k": "v"}]]], "tuple": (1, "x", None)}},
        {"k": list(range(50))},
    ]
    for value in details:
        _same(_result(evaluator={"details": value}))
    for marks in ({}, {"suite_version": "0123456789ab"}, {"shadow": True}, {"backfill": True}):
        encoded = _same(_result(**marks))
        assert all(
            (name.encode() in encoded) == (name in marks) for name in ("suite_version", "shadow", "backfill")
        )
    _same(_result(failed_gates=["g1", "g2"], category="qa_simple"))


class _Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class _Point:
    x: int


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 21, 10, 0, tzinfo=UTC),
        {1, 2},
        b"bytes",
        _Text("sub"),
        {"k": {1: "non-string key"}},
        2**64,
        -(2**63) - 1,
        _Point(1),
        _Colour.RED,
        "\ud800 lone surrogate",
    ],
)
def test_what_orjson_would_write_otherwise_takes_pydantics_path(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _result(evaluator={"details": {"v": value}})
    try:
        expected = result.model_dump_json().encode()
    except Exception as exc:  # pydantic refuses it too: then encode_result raises the same way
        with pytest.raises(type(exc)):
            encode_result(result)
        return
    assert encode_result(result) == expected


def test_what_is_left_to_pydantic_and_what_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    dump = GradedResult.model_dump_json

    def counted(self: GradedResult, **kwargs: Any) -> str:
        calls.append(type(self))
        return dump(self, **kwargs)

    monkeypatch.setattr(GradedResult, "model_dump_json", counted)
    block = JudgeBlock(
        status="ok",
        mode="blend",
        prompt="rubric",
        category=None,
        panel_score=7.5,
        metrics_score=5.0,
        final_score=6.5,
        reason="r",
        judges=[],
        fallbacks=[],
    )
    _same(_result(judge=block))
    assert len(calls) == 1  # only the comparison: a judge block is written by orjson too
    calls.clear()
    odd = block.model_copy()
    odd.__dict__["extra"] = 1  # a dictionary that is not exactly the fields: left to pydantic
    _same(_result(judge=odd))
    assert len(calls) == 2

    class Sub(GradedResult):
        pass

    sub = Sub(**_result().__dict__)
    assert encode_result(sub) == dump(sub).encode()
    calls.clear()
    _same(_result())
    assert len(calls) == 1  # only the comparison: the plain result took orjson's path
    assert models.encode_result is encode_result
    assert orjson.loads(encode_result(_result()))["evaluators"][0]["name"] == "e"
