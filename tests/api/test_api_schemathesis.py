"""A schemathesis run against ``streameval api`` (a real server process on a real Redis) and its
served OpenAPI document: every response must match the document (status, content type, schema,
Allow headers), no 5xx, negative data rejected, writes without the token refused, and the stateful
phase follows the document's links (create → get / update / test / delete).

``positive_data_acceptance`` is excluded on purpose: a schema cannot say that ``config.code`` must
compile, or which ``params`` a given preset takes, so schema-valid bodies may rightly get a 400.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streameval.api import openapi_document
from streameval.features.web import dashboard_features

TOKEN = "schemathesis-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def api_server(redis_url: str, prefix: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "STREAMEVAL_REDIS_PREFIX": prefix,
        "STREAMEVAL_API_TOKEN": TOKEN,
    }
    log = (tmp_path / "api.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streameval", "api", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (tmp_path / "api.log").read_text()
            assert time.monotonic() < deadline, "streameval api did not answer /health"
            time.sleep(0.1)  # polling the server's start with a deadline, not waiting for a result
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


def test_schemathesis_run_against_the_served_openapi_document(api_server: str) -> None:
    cli = "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "run",
            f"{api_server}/api/v1/openapi.json",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--max-examples",
            "15",
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
    operations = sum(
        m != "parameters" for ops in openapi_document(dashboard_features())["paths"].values() for m in ops
    )
    assert re.search(rf"Tested: {operations}\b", done.stdout), done.stdout[
        -3000:
    ]  # every operation was exercised
