"""Nothing a user reads names our internal documents: no "seed 003", "issue 7", "V2", "the statistics work"
or the team's DESIGN.md.

Users never saw the seed documents or the issue tracker. Checked: README and docs/ (all of it: prose,
tables and the comments of examples), the web pages (without HTML/JS comments), every string literal
in stream/ and agents/ that is not a docstring (error messages, reasons, CLI text, descriptions), and
what the running program shows: evaluator summaries and parameter schemas, the OpenAPI document and
every command's --help. Code comments and docstrings cite a specification by its name ("the multi-judge
spec", docs/glossary.md), never by a document or issue number: checked over every file of the repository.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streameval._cliargs import _Formatter, build_parser
from streameval.api._openapi import openapi_document
from streameval.evaluators import evaluator_class, evaluator_names
from streameval.features.web import dashboard_features

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(
    r"\b[Ss]eeds? ?\d{3}|\b[Ss]eed documents?\b|\b[Ii]ssues? ?#?\d+\b|pre-issue|\bthe issue's\b"
    r"|\bthe statistics work\b|\bV2\b|DESIGN\.md"
)


def hits(text: str) -> list[str]:
    return [text[max(0, m.start() - 40) : m.end() + 20].replace("\n", " ") for m in INTERNAL.finditer(text)]


def test_the_pattern_catches_what_it_should() -> None:
    assert hits("levels (seed 003)") and hits("see issue 7") and hits("issue #12") and hits("are V2")
    assert hits("come with the statistics work") and hits("Seeds 000-004") and hits("see shared/DESIGN.md")
    assert not hits("SQuAD v2.0, /api/v1, the RNG seed, `seed=False`, issues with judges")


@pytest.mark.parametrize(
    "path", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
)
def test_readme_and_docs(path: str) -> None:
    assert hits((ROOT / path).read_text(encoding="utf-8")) == []


def _without_web_comments(text: str) -> str:
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(?<![:\"'\\])//[^\n]*", "", text)  # not the // of a URL


@pytest.mark.parametrize(
    "path", sorted(p.name for p in (ROOT / "stream" / "api" / "web").iterdir() if p.is_file())
)
def test_web_pages(path: str) -> None:
    assert (
        hits(_without_web_comments((ROOT / "stream" / "api" / "web" / path).read_text(encoding="utf-8")))
        == []
    )


def _string_literals(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


@pytest.mark.parametrize("package", ["stream", "agents"])
def test_string_literals_of_the_code(package: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {hit}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in _string_literals(path)
        for hit in hits(text)
    ]
    assert found == []


def test_what_the_program_shows() -> None:
    shown = [json.dumps(openapi_document(dashboard_features()), ensure_ascii=False)]
    for name in evaluator_names():
        cls = evaluator_class(name)
        shown += [cls.summary, json.dumps(cls.Params.model_json_schema(), ensure_ascii=False)]
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    shown.append(parser.format_help())
    for command in sub.choices.values():
        command.formatter_class = _Formatter
        shown.append(command.format_help())
    assert [hit for text in shown for hit in hits(text)] == []


#: a document or issue number in any form, in comments and docstrings too
NUMBERED = re.compile(r"\b[Ss]eeds? ?\d|\b[Ii]ssues? ?#?\d+\b|\bthe issue's\b|shared/seeds")
REPOSITORY = (
    "README.md",
    "pyproject.toml",
    ".ci",
    "agents",
    "bench",
    "deploy",
    "docs",
    "examples",
    "schemas",
    "stream",
    "tests",
)
#: this file (its pattern and examples) and the test corpus of real sentences
NOT_CHECKED = {Path(__file__).resolve(), ROOT / "tests" / "data"}


def _repository_files() -> Iterator[Path]:
    for name in REPOSITORY:
        top = ROOT / name
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            if (
                path.is_file()
                and "node_modules" not in path.parts
                and "__pycache__" not in path.parts
                and not any(path == skip or skip in path.parents for skip in NOT_CHECKED)
            ):
                yield path


def test_no_document_or_issue_numbers_anywhere() -> None:
    found = []
    for path in _repository_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
            for m in NUMBERED.finditer(text)
        ]
    assert found == [], "cite the spec by its name (docs/glossary.md) or describe the feature:\n" + "\n".join(
        found
    )
