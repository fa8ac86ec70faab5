"""A real Redis Cluster for tests: 3 masters + 3 replicas from the redis-server binary, on free ports.

Import the fixture into a test module (``from cluster_support import redis_cluster  # noqa: F401``).
Skips when no redis-server / redis-cli binary is installed.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

__all__ = ["Cluster", "redis_cluster"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ports(n: int) -> list[int]:
    # a cluster node also listens on port + 10000 (the cluster bus): both must be free
    out: list[int] = []
    while len(out) < n:
        port = _free_port()
        if port + 10000 < 65536 and port not in out:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            out.append(port)
    return out


@dataclass
class Cluster:
    directory: Path
    ports: list[int]
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """A seed node that is alive (a test may have killed one)."""
        return f"redis+cluster://127.0.0.1:{self.alive()[0]}"

    def start_node(self, port: int) -> None:
        node = self.directory / str(port)
        node.mkdir(exist_ok=True)
        self.procs[port] = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--dir",
                str(node),
                "--protected-mode",
                "no",
                "--cluster-replica-validity-factor",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def kill(self, port: int) -> None:
        proc = self.procs.pop(port)
        proc.kill()
        proc.wait()

    def wait_replicated(self, port: int, timeout: float = 30) -> None:
        """Wait until the replicas of master ``port`` have every write it acknowledged so far.

        Redis replication is asynchronous (docs/scaling.md): without this, a failover test on a loaded
        box loses writes the replica had not received yet, which is Redis's limit, not ours.
        """
        node = redis.Redis(port=port, socket_timeout=2)
        try:
            target = int(node.info("replication")["master_repl_offset"])
            deadline = time.monotonic() + timeout
            while True:
                info = node.info("replication")
                offsets = [
                    int(v["offset"]) for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                ]
                if offsets and min(offsets) >= target:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"replicas of {port} at {offsets}, master at {target} after {timeout}s"
                    )
                time.sleep(0.05)
        finally:
            node.close()

    def stop(self) -> None:
        for port in list(self.procs):
            self.kill(port)

    def masters(self) -> list[int]:
        client = RedisCluster(host="127.0.0.1", port=self.alive()[0])
        try:
            return sorted(n.port for n in client.get_primaries())
        finally:
            client.close()

    def alive(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def wait_ok(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for port in self.alive():
                try:
                    node = redis.Redis(port=port, socket_timeout=1)
                    info = node.cluster("info")
                    state = info.get("cluster_state") if isinstance(info, dict) else str(info)
                    replication = node.info("replication")
                    if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                        state = "replica syncing"  # a failover before this would lose what was written
                    states.append(state)
                except redis.RedisError:
                    states.append("down")
            if states and all(s == "ok" for s in states):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"Redis Cluster not ok after {timeout}s: {states}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        pytest.skip("redis-server / redis-cli not installed")
    cluster = Cluster(tmp_path_factory.mktemp("redis-cluster"), _ports(6))
    try:
        for port in cluster.ports:
            cluster.start_node(port)
        for port in cluster.ports:
            deadline = time.monotonic() + 20
            while True:
                try:
                    redis.Redis(port=port, socket_timeout=1).ping()
                    break
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in cluster.ports),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        cluster.wait_ok()
        yield cluster
    finally:
        cluster.stop()
