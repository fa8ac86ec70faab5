"""Quality metrics by model and suite (/metrics), their bounded model label, and the Grafana dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY

from streameval import quality_metrics, telemetry
from streameval.config import parse_config
from streameval.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "streameval-quality.json"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_model_labels_are_bounded() -> None:
    labels = quality_metrics.ModelLabels(2)
    assert [labels(m) for m in ["a", "b", "c", "a", "d", "b"]] == ["a", "b", "other", "a", "other", "b"]
    assert quality_metrics.ModelLabels(0)("a") == "other"
    assert quality_metrics.ModelLabels(5)("other") == "other"


async def test_results_are_counted_by_model_and_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quality_metrics, "_labels", quality_metrics.ModelLabels(1))
    suite = f"qm-{id(monkeypatch)}"  # a suite name no other test uses
    _, suites = parse_config(
        {
            "suites": [
                {
                    "name": suite,
                    "default": True,
                    "threshold": 0.5,
                    "evaluators": [
                        {"evaluator": "contains", "params": {"value": "Paris"}},
                        {
                            "evaluator": "regex",
                            "name": "no_digits",
                            "params": {"pattern": r"^\D*$"},
                            "weight": 0,
                            "gate": True,
                        },
                    ],
                }
            ]
        }
    )
    pipeline = Pipeline(suites)
    events: list[dict[str, Any]] = [
        {"id": "1", "model": "m1", "output": "Paris"},
        {"id": "2", "model": "m1", "output": "Rome"},
        {"id": "3", "model": "m2", "output": "Paris 75001"},  # over the model limit: "other"; gate fails
    ]
    outcomes = [await pipeline.process(orjson.dumps(e)) for e in events]
    telemetry.observe_outcomes(outcomes)
    assert sample("streameval_result_score_count", model="m1", suite=suite) == 2
    assert sample("streameval_result_score_sum", model="m1", suite=suite) == 1.0
    assert sample("streameval_result_passed_total", model="m1", suite=suite) == 1
    assert sample("streameval_result_grades_total", model="m1", suite=suite, grade="excellent") == 1
    assert sample("streameval_result_grades_total", model="m1", suite=suite, grade="severe_defect") == 1
    assert sample("streameval_result_score_count", model="other", suite=suite) == 1
    assert sample("streameval_result_passed_total", model="other", suite=suite) == 0
    assert sample("streameval_result_gate_failures_total", suite=suite, gate="no_digits") == 1
    assert sample("streameval_result_score_count", model="m2", suite=suite) == 0


def exported_names() -> set[str]:
    names: set[str] = set()
    for metric in REGISTRY.collect():
        names.add(metric.name)
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}
        names.update(metric.name + s for s in suffixes.get(metric.type, []))
    return names


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel["targets"]]
    out += [
        (f"variable {v['name']}", v["definition"])
        for v in board["templating"]["list"]
        if v["type"] == "query"
    ]
    return out


def test_every_dashboard_panel_has_queries() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert board["panels"] and all(panel["targets"] for panel in board["panels"])
    titles = [p["title"] for p in board["panels"]]
    assert "Mean score by model × suite" in titles and "Pass rate by model × suite" in titles


@pytest.mark.parametrize(("where", "expr"), dashboard_queries())
def test_every_dashboard_query_uses_exported_metrics(where: str, expr: str) -> None:
    names = re.findall(r"\bstreameval_[a-z_]+", expr)
    assert names, f"{where}: no streameval metric in {expr!r}"
    known = exported_names()
    for name in names:
        assert name in known, f"{where}: {name} is not a metric the worker exports"
