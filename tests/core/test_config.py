"""Suite config: every bad field reported with file, line and path; routing rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streameval.config import load_config, parse_config
from streameval.errors import ConfigError, UnroutableEvent
from streameval.models import RequestEvent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suites.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("yaml_text", "line", "path", "message"),
    [
        (
            "suites:\n  - name: a\n    threshold: 1.5\n    evaluators: [{evaluator: exact_match}]\n",
            3,
            "suites[0].threshold",
            "less than or equal to 1",
        ),
        (
            "suites:\n  - name: a\n    evaluators:\n      - {evaluator: exact_match}\n      - {evaluator: nope}\n",
            5,
            "suites[0].evaluators[1].evaluator",
            "unknown evaluator 'nope'; valid evaluators: ",
        ),
        (
            "suites:\n  - name: a\n    evaluators:\n      - evaluator: similarity\n        params:\n          threshold: 2\n",
            6,
            "suites[0].evaluators[0].params.threshold",
            "less than or equal to 1",
        ),
        (
            "suites:\n  - name: a\n    evaluators:\n      - {evaluator: regex, params: {pattern: '('}}\n",
            4,
            "suites[0].evaluators[0].params",
            "invalid regular expression",
        ),
        (
            "suites:\n  - name: a\n    evaluators: [{evaluator: exact_match, weight: 0}]\n",
            3,
            "suites[0].evaluators",
            "weights sum to 0",
        ),
        (
            "suites:\n  - name: a\n    evaluators: [{evaluator: exact_match}, {evaluator: exact_match}]\n",
            3,
            "suites[0].evaluators[1].name",
            "used twice",
        ),
        (
            "suites:\n  - name: a\n    evaluators: [{evaluator: exact_match}]\n  - name: a\n    evaluators: [{evaluator: contains}]\n",
            2,
            "suites",
            "repeated: a",
        ),
        (
            "suites:\n  - name: a\n    mtach: {model: [x]}\n    evaluators: [{evaluator: exact_match}]\n",
            3,
            "suites[0].mtach",
            "Extra inputs are not permitted",
        ),
        ("suites: []\n", 1, "suites", "at least 1 item"),
        (
            "suites:\n  - name: a\n    grading: stars\n    evaluators: [{evaluator: exact_match}]\n",
            3,
            "suites[0].grading",
            "'levels' or 'letters'",
        ),
    ],
)
def test_bad_config_names_file_line_and_path(
    tmp_path: Path, yaml_text: str, line: int, path: str, message: str
) -> None:
    file = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as info:
        load_config(file)
    issues = [i for i in info.value.issues if i.path == path]
    assert issues, f"no issue at {path}: {info.value}"
    assert issues[0].line == line
    assert message in issues[0].message
    assert str(file) in str(info.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    file = write(
        tmp_path,
        "suites:\n  - name: a\n    evaluators:\n      - {evaluator: nope}\n      - {evaluator: regex}\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(file)
    assert {i.path for i in info.value.issues} == {
        "suites[0].evaluators[0].evaluator",
        "suites[0].evaluators[1].params.pattern",
    }


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_config(write(tmp_path, "suites:\n  - name: [unclosed\n"))
    assert info.value.issues[0].line is not None


def test_bundled_example_config_is_valid() -> None:
    config, suites = load_config(Path(__file__).resolve().parents[2] / "examples" / "suites.yaml")
    assert [s.name for s in suites.all] == [s.name for s in config.suites]


SUITES: dict[str, Any] = {
    "suites": [
        {"name": "explicit-only", "evaluators": [{"evaluator": "exact_match"}]},
        {
            "name": "gpt-qa",
            "match": {"model": ["gpt-4*"], "category": ["qa_simple"]},
            "evaluators": [{"evaluator": "exact_match"}],
        },
        {"name": "qa", "match": {"category": ["qa_*"]}, "evaluators": [{"evaluator": "exact_match"}]},
        {"name": "tagged", "match": {"tags": ["json", "xml"]}, "evaluators": [{"evaluator": "exact_match"}]},
        {"name": "fallback", "default": True, "evaluators": [{"evaluator": "exact_match"}]},
    ]
}


@pytest.mark.parametrize(
    ("fields", "suite"),
    [
        ({"model": "gpt-4o", "category": "qa_simple"}, "gpt-qa"),  # first match wins
        ({"model": "claude", "category": "qa_simple"}, "qa"),
        ({"model": "gpt-4o", "category": "translation"}, "fallback"),  # all keys must match
        ({"model": "m", "tags": ["prod", "json"]}, "tagged"),  # any tag
        ({"model": "m", "tags": ["prod"]}, "fallback"),
        (
            {"model": "gpt-4o", "category": "qa_simple", "suite": "explicit-only"},
            "explicit-only",
        ),  # explicit wins
        ({"model": "m"}, "fallback"),
    ],
)
def test_routing(fields: dict[str, Any], suite: str) -> None:
    _, suites = parse_config(SUITES)
    assert suites.route(RequestEvent(id="e", output="o", **fields)).name == suite


def test_unroutable_events() -> None:
    _, suites = parse_config({"suites": [s for s in SUITES["suites"] if not s.get("default")]})
    with pytest.raises(UnroutableEvent) as info:
        suites.route(RequestEvent(id="e", model="m", output="o"))
    assert info.value.kind == "no_suite"
    with pytest.raises(UnroutableEvent) as info:
        suites.route(RequestEvent(id="e", model="m", output="o", suite="nope"))
    assert info.value.kind == "unknown_suite" and "explicit-only" in info.value.reason
