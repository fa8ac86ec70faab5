"""Schemathesis against ``streameval guard``'s own OpenAPI document: every answer to generated and mutated
checks (bad JSON, wrong types, missing fields, unknown suites) is one the document names, in its shape."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

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
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streameval",
            "guard",
            "--config",
            str(config),
            "--port",
            "0",
            "--workers",
            "1",
        ],
        env={"PATH": "/usr/bin:/bin", "STREAMEVAL_API_TOKEN": TOKEN},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    url = None
    for line in process.stderr:
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            url = found.group(1)
            break
    assert url is not None, "the guard server did not start"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # polling the server's start with a deadline, not a result
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    yield url
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


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
