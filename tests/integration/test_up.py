"""``streameval up``: start, produce, see a result, Ctrl-C stops everything; Redis data survives a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import redis

from streameval.embedded import free_port
from streameval.kafka_io import collect, produce

pytestmark = pytest.mark.integration


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Up:
    def __init__(self, state: Path, ports: dict[str, int], log: Path) -> None:
        self.out = log
        args = [
            sys.executable,
            "-m",
            "streameval",
            "up",
            "--state-dir",
            str(state),
            "--no-judges",
            *(x for name, port in ports.items() for x in (f"--{name}-port", str(port))),
        ]
        with log.open("wb") as handle:
            self.proc = subprocess.Popen(
                args,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "REDIS_URL": "", "STREAMEVAL_LOG_LEVEL": "warn"},
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_up(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while "Ctrl-C stops everything." not in self.text():
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.2)

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=90)


def test_up_runs_until_ctrl_c_and_keeps_redis_state(tmp_path: Path) -> None:
    ports = {"kafka": free_port(), "redis": free_port(), "web": free_port()}
    state = tmp_path / "state"
    up = Up(state, ports, tmp_path / "up-1.log")
    try:
        up.wait_up()
        text = up.text()
        bootstrap = f"127.0.0.1:{ports['kafka']}"
        assert f"streameval produce events.jsonl --bootstrap {bootstrap}" in text
        assert f"streameval tail --topic evals.results --bootstrap {bootstrap}" in text
        assert "memory storage: topics start empty on every run" in text
        for path in ("/health", "/dashboard", "/api/v1/evaluators"):
            assert httpx.get(f"http://127.0.0.1:{ports['web']}{path}", timeout=10).status_code == 200, path

        # a second `up` on the same directory refuses, and touches nothing
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "streameval",
                "up",
                "--state-dir",
                str(state),
                "--kafka-port",
                str(free_port()),
                "--redis-port",
                str(free_port()),
                "--web-port",
                str(free_port()),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 2 and "is in use by `streameval up`" in again.stderr

        event = {"id": "up-1", "model": "m", "output": "Paris", "expected": "Paris", "category": "qa_simple"}
        asyncio.run(produce(bootstrap, "evals.requests", [orjson.dumps(event)]))
        records = asyncio.run(collect(bootstrap, ["evals.results"], until=lambda r: len(r) >= 1, timeout=120))
        assert orjson.loads(records[0].value)["id"] == "up-1"
        assert up.interrupt() == 0, up.text()
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
    assert "stopped; state kept in" in up.text()
    assert not any(listening(port) for port in ports.values())  # broker, Redis, worker web server all gone
    assert not (state / "up.pid").exists()

    # restart on the same directory: Redis's data came back (the event's idempotency mark is there)
    up = Up(state, ports, tmp_path / "up-2.log")
    try:
        up.wait_up()
        client = redis.Redis(port=ports["redis"])
        # the idempotency marks (streameval.keyspace: P{model:suite}:mk:...) survived the restart
        assert any(b":mk:" in key for key in client.scan_iter(match="streameval:*", count=1000))
        client.close()
        assert up.interrupt() == 0
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
    assert not any(listening(port) for port in ports.values())
