"""Shared helpers of the guard tests (not a test module)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from streameval.config import parse_config
from streameval.features.guard._check import Guard

CARD_FREE = r"^(?!.*\b\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}\b)"


def support_suite(guard: dict[str, Any]) -> dict[str, Any]:
    """The default suite ``support``: an answer must name an order (``ORD-``); one with a card number is
    blocked (the ``no_card`` gate); ``guard``: its guard section."""
    return {
        "name": "support",
        "default": True,
        "evaluators": [
            {"evaluator": "contains", "params": {"value": "ORD-"}},
            {
                "evaluator": "regex",
                "name": "no_card",
                "gate": True,
                "weight": 0,
                "params": {"pattern": CARD_FREE},
            },
        ],
        "guard": guard,
    }


def start_guard(config: Path, workers: int, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``streameval guard --port 0`` on ``config`` with ``workers`` processes; the process and its URL, read
    off its "listening on" line (stderr stays a pipe). Raises RuntimeError if it exits before the line."""
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
            str(workers),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            break
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            return process, found.group(1)
    process.kill()
    process.wait()
    raise RuntimeError("the guard server did not start")


def wait_healthy(url: str) -> None:
    """Until ``url``'s /health answers 200, at most a minute (every server process binds after the line)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # polling the server's start with a deadline, not a result
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)


@contextmanager
def running_guard(
    config: Path, workers: int, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A started, healthy guard server (:func:`start_guard`), stopped by SIGTERM on the way out if it still runs."""
    process, url = start_guard(config, workers, env)
    try:
        wait_healthy(url)
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def guard_of(suites: list[dict[str, Any]], **top: Any) -> Guard:
    _, loaded = parse_config({"suites": suites, **top})
    return Guard(loaded)


def raw(output: str, **fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "output": output, **fields})
