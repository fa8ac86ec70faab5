"""Shared fixtures: the real Tansu broker, a real Redis server, worker processes.

Redis: ``REDIS_URL`` if set, else 127.0.0.1:6379 if it answers, else an embedded valkey-server.
Every test gets its own key prefix and deletes only its own keys (the server may be shared).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker, EmbeddedRedis
from streameval.outputs import OUTPUTS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
    elif _reachable("127.0.0.1", 6379):
        yield "redis://127.0.0.1:6379/0"
    else:
        with EmbeddedRedis() as server:
            yield server.url


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A unique Redis key prefix; its keys are deleted after the test."""
    value = f"streameval-test:{uuid.uuid4().hex[:12]}:"
    yield value
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{value}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
async def aredis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as server:
        yield server


class WorkerProcess:
    """A ``streameval worker`` subprocess; its log is printed if the test fails."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streameval", "worker"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def topics() -> dict[str, str]:
    """Unique topic names for one test: ``requests`` and one per output (``results``, ``deadletter``, ...)."""
    run = uuid.uuid4().hex[:8]
    names = ["requests", *(output.setting.removeprefix("topic_") for output in OUTPUTS)]
    return {name: f"t{run}.evals.{name}" for name in names}


@pytest.fixture
def start_worker(
    broker: EmbeddedBroker,
    redis_url: str,
    prefix: str,
    topics: dict[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start workers on the test's topics and Redis prefix: ``start_worker(config, app_id=...)``."""
    started: list[WorkerProcess] = []

    def start(config: Path, *, app_id: str | None = None, **extra_env: str) -> WorkerProcess:
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "REDIS_URL": redis_url,
            "STREAMEVAL_CONFIG": str(config),
            "STREAMEVAL_APP_ID": app_id or f"test-{uuid.uuid4().hex[:8]}",
            "STREAMEVAL_REDIS_PREFIX": prefix,
            "STREAMEVAL_TOPIC_PARTITIONS": "2",
            "STREAMEVAL_LOG_LEVEL": "warn",
            **{f"STREAMEVAL_TOPIC_{k.upper()}": v for k, v in topics.items()},
            **extra_env,
        }
        worker = WorkerProcess(env, tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for worker in started:
            sys.stderr.write(f"\n--- {worker.log_path} ---\n{worker.log()[-5000:]}\n")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
