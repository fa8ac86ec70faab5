"""``streameval guard`` as a real process (two server processes on one port) with the Python client, sync
and async over kept-alive connections, and ``streameval check-one`` reading an event from stdin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import yaml
from _guard_helpers import running_guard, support_suite

from streameval.guard_client import AsyncGuardClient, CheckRefused, GuardClient

TOKEN = "server-test-token-0123456789"
SUITES = {"suites": [support_suite({"deadline_ms": 200})]}
CARD = "Your card 4111 1111 1111 1111 is on order ORD-9"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEVAL_")}
    return {**env, "STREAMEVAL_API_TOKEN": TOKEN}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    config = tmp_path_factory.mktemp("guard") / "suites.yaml"
    config.write_text(yaml.safe_dump(SUITES))
    with running_guard(config, 2, _env()) as (process, url):
        yield url, process, config


def test_the_sync_client_reuses_its_connection(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    url = server[0]
    with GuardClient(url, token=TOKEN, timeout=10) as client:
        answers = [
            client.check(f"Order ORD-{i} ships", input="where is my order?", id=f"s{i}") for i in range(20)
        ]
        blocked = client.check(CARD)
        pool = client._client._transport._pool  # type: ignore[attr-defined]
        assert len(pool.connections) == 1  # one kept-alive connection served every check
    assert {a.decision for a in answers} == {"allow"} and [a.id for a in answers] == [
        f"s{i}" for i in range(20)
    ]
    assert blocked.decision == "block" and not blocked.allowed and blocked.reasons[0].startswith("no_card")


async def test_the_async_client(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    import asyncio

    async with AsyncGuardClient(server[0], token=TOKEN, timeout=10) as client:
        answers = await asyncio.gather(*(client.check(f"ORD-{i}" if i % 2 else "nothing") for i in range(16)))
        assert [a.decision for a in answers] == ["block", "allow"] * 8
        with pytest.raises(CheckRefused) as caught:
            await client.check("ORD-1", suite="nope")
    assert caught.value.status == 404 and "valid suites: support" in caught.value.message


def test_a_wrong_token_is_refused(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    with GuardClient(server[0], token="not-the-token-0123456789", timeout=10) as client:
        with pytest.raises(CheckRefused) as caught:
            client.check("ORD-1")
    assert caught.value.status == 401


@pytest.mark.parametrize(
    ("event", "code", "decision"),
    [
        (b'{"model": "m", "output": "Order ORD-1 ships"}', 0, "allow"),
        (orjson.dumps({"model": "m", "output": CARD}), 1, "block"),
        (b'{"model": "m", "output": "a", "output": "b"}', 2, None),
    ],
)
def test_check_one_reads_stdin(
    server: tuple[str, subprocess.Popen[str], Path], event: bytes, code: int, decision: str | None
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streameval", "check-one", "--url", server[0]],
        input=event,
        env=_env(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == code, done.stderr
    if decision is not None:
        assert orjson.loads(done.stdout)["decision"] == decision
    else:
        assert b"duplicate key 'output'" in done.stderr


def test_sigterm_stops_every_process(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    url, process, _ = server
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health", timeout=2)
