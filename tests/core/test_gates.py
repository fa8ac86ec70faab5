"""Hard gates: an evaluator with ``gate: true`` that does not pass fails the result whatever the mean."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from _gates_helpers import CARD, CLEAN, suite
from jsonschema import Draft202012Validator

from streameval import schemas
from streameval.config import load_config, parse_config
from streameval.errors import ConfigError
from streameval.grading import apply_gates, lowest_grade
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline


async def run(config: dict[str, Any], output: str, **event: Any) -> dict[str, Any]:
    _, suites = parse_config(config)
    outcome = await Pipeline(suites).process(
        orjson.dumps({"id": "e1", "model": "m", "output": output, **event})
    )
    assert outcome.result is not None
    return outcome.result.model_dump(mode="json")


@pytest.mark.parametrize(
    ("failed", "scale", "passed", "grade"),
    [
        ((), "levels", True, "good"),
        (("pii",), "levels", False, "severe_defect"),
        (("pii",), "letters", False, "F"),
        (("pii", "refusal"), "letters", False, "F"),
    ],
)
def test_apply_gates(failed: tuple[str, ...], scale: Any, passed: bool, grade: str) -> None:
    gates = [(name, name not in failed, f"{name} said no") for name in ("pii", "refusal")]
    verdict = apply_gates(0.8, 0.6, scale, gates)
    assert (verdict.passed, verdict.grade, verdict.failed_gates) == (passed, grade, failed)
    for name in failed:
        assert f"gate {name!r} failed: {name} said no" in (verdict.reason or "")
    assert (verdict.reason is None) == (not failed)


def test_no_gates_is_the_plain_threshold() -> None:
    assert apply_gates(0.59, 0.6, "levels", []).passed is False
    assert apply_gates(0.6, 0.6, "levels", []).passed is True
    assert lowest_grade("levels") == "severe_defect" and lowest_grade("letters") == "F"


async def test_a_failed_gate_fails_a_high_scoring_result() -> None:
    result = await run(suite(), CARD)
    assert result["score"] == pytest.approx(0.75)  # the weighted mean still says "good"
    assert result["passed"] is False
    assert result["grade"] == "severe_defect"
    assert result["failed_gates"] == ["no_card"]
    assert result["reason"].startswith("gate 'no_card' failed: ")
    Draft202012Validator(schemas.load("result")).validate(result)


async def test_the_same_evaluator_without_gate_only_weighs() -> None:
    result = await run(suite(gate=False), CARD)
    assert (result["passed"], result["grade"], result["failed_gates"], result["reason"]) == (
        True,
        "good",
        [],
        None,
    )


async def test_a_passing_gate_changes_nothing() -> None:
    result = await run(suite("letters"), CLEAN)
    assert (result["score"], result["passed"], result["grade"], result["failed_gates"]) == (
        1.0,
        True,
        "A+",
        [],
    )


async def test_letters_scale_gets_f() -> None:
    assert (await run(suite("letters"), CARD))["grade"] == "F"


async def test_a_gate_that_cannot_score_fails_closed() -> None:
    config = suite()
    config["suites"][0]["evaluators"].append({"evaluator": "exact_match", "weight": 0, "gate": True})
    result = await run(config, CLEAN)  # no expected answer: exact_match errors with missing_field
    assert result["passed"] is False and result["failed_gates"] == ["exact_match"]


def test_gate_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(suite(gate="sometimes"))  # type: ignore[arg-type]
    assert "suites[0].evaluators[1].gate" in str(info.value)


@pytest.mark.parametrize("processes", [0, 2])
def test_offline_file(tmp_path: Path, processes: int) -> None:
    """``streameval evaluate``'s path, in this process and in evaluation processes."""
    text = yaml.safe_dump(suite())
    (tmp_path / "suites.yaml").write_text(text, encoding="utf-8")
    lines = [orjson.dumps({"id": f"e{i}", "model": "m", "output": t}) for i, t in enumerate([CARD, CLEAN])]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    _, suites = load_config(tmp_path / "suites.yaml")
    asyncio.run(
        evaluate_file(
            Pipeline(suites),
            tmp_path / "in.jsonl",
            tmp_path / "out.jsonl",
            tmp_path / "dl.jsonl",
            processes=processes,
            config_text=text,
        )
    )
    out = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [(r["id"], r["passed"], r["failed_gates"]) for r in out] == [
        ("e0", False, ["no_card"]),
        ("e1", True, []),
    ]
