"""Schemathesis against ``streameval guard``'s own OpenAPI document: every answer to generated and mutated
checks (bad JSON, wrong types, missing fields, unknown suites) is one the document names, in its shape."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _guard_helpers import running_guard

TOKEN = "schema-test-token-0123456789"


@pytest.fixture
def guard_server(tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "suites.yaml"
    suite = {
        "name": "s",
        "default": True,
        "evaluators": [{"evaluator": "regex", "params": {"pattern": r"\S"}}, {"evaluator": "exact_match"}],
        "guard": {"deadline_ms": 500},
    }
    config.write_text(yaml.safe_dump({"suites": [suite]}))
    with running_guard(config, 1, {"PATH": "/usr/bin:/bin", "STREAMEVAL_API_TOKEN": TOKEN}) as (_, url):
        yield url


def test_schemathesis_run_against_the_guards_document(guard_server: str) -> None:
    cli = "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "run",
            f"{guard_server}/api/v1/openapi.json",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--max-examples",
            "40",
            "--workers",
            "1",
            "--exclude-checks",
            "positive_data_acceptance",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert re.search(r"Tested: 1\b", done.stdout), done.stdout[-3000:]
