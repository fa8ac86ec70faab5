"""``streameval evaluate --labels``: the same agreement table offline, and the --min-human-kappa gate."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sklearn.metrics import cohen_kappa_score

from streameval.cli import main
from streameval.features.labels import human_agreement, join_in_memory
from streameval.models import Feedback, GradedResult

CONFIG = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}, {evaluator: token_f1}]
"""
OUTPUTS = ["Paris", "paris", "Lyon", "Paris, France", "Berlin", "The capital is Paris", "Rome", "Paris"]


def write(tmp_path: Path, people: list[bool]) -> tuple[Path, Path, Path]:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    events = tmp_path / "events.jsonl"
    events.write_bytes(
        b"\n".join(
            orjson.dumps({"id": f"e{i}", "model": "m", "output": o, "expected": "Paris"})
            for i, o in enumerate(OUTPUTS)
        )
    )
    labels = tmp_path / "labels.jsonl"
    lines = [orjson.dumps({"id": f"e{i}", "passed": p, "annotator": "ana"}) for i, p in enumerate(people)]
    lines += [b'{"id": "nobody", "passed": true}', b"not json"]
    labels.write_bytes(b"\n".join(lines))
    return config, events, labels


def run(tmp_path: Path, people: list[bool], *extra: str) -> int:
    config, events, labels = write(tmp_path, people)
    return main(
        [
            "evaluate",
            "--config",
            str(config),
            "--input",
            str(events),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--labels",
            str(labels),
            *extra,
        ]
    )


def test_the_table_and_a_passing_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    people = ["paris" in o.lower() for o in OUTPUTS]
    assert run(tmp_path, people, "--min-human-kappa", "0.3") == 0
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "agreement with people" in text and "evaluator:exact_match" in text
    assert "unmatched: 2" in text and "no result for event id 'nobody'" in text
    results = [
        GradedResult.model_validate_json(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()
    ]
    labels = [Feedback(id=f"e{i}", passed=p, annotator="ana") for i, p in enumerate(people)]
    rows, layouts, unmatched = join_in_memory(results, labels)
    figures = human_agreement(rows["m:qa"], layouts)
    assert figures is not None and not unmatched
    assert figures.raters["result"].kappa == pytest.approx(
        cohen_kappa_score([r.passed for r in results], people)
    )


def test_the_gate_fails_when_people_disagree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    people = ["paris" not in o.lower() for o in OUTPUTS]  # people say the opposite
    assert run(tmp_path, people, "--min-human-kappa", "0.4") == 1
    assert "FAIL m / qa: Cohen's kappa with people -0.429" in capsys.readouterr().err


def test_min_human_kappa_needs_labels(tmp_path: Path) -> None:
    config, events, _ = write(tmp_path, [True])
    assert (
        main(
            [
                "evaluate",
                "--config",
                str(config),
                "--input",
                str(events),
                "--output",
                str(tmp_path / "o.jsonl"),
                "--min-human-kappa",
                "0.4",
            ]
        )
        == 2
    )
