"""TLS and SASL to Kafka, TLS and ACL to Redis, on real servers on loopback.

Kafka: Tansu behind the TLS / SASL proxy of tests/security_helpers.py (advertised on the proxy's port,
so every client connection goes through it); certificates made by openssl in the test. Redis:
redis-server 7 with only a TLS port and an ACL user. The worker is the real ``streameval worker``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from security_helpers import (
    Pki,
    RedisTls,
    RedisTlsCluster,
    TansuBehind,
    TlsSaslProxy,
    make_pki,
    server_context,
)

from streameval.api import broker_check
from streameval.connect_check import check_kafka, check_redis
from streameval.embedded import free_port
from streameval.errors import ConnectFailed
from streameval.kafka_io import collect, ensure_topics, produce
from streameval.kafka_security import KafkaSecurity
from streameval.redis_security import redis_options
from streameval.settings import load_settings
from streameval.store import hash_fields

from .test_stream import MAX_EVENT_BYTES, make_events

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
USERS = {"eval-worker": "kafka-secret-Aa1"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def front(
    pki: Pki | None, *, users: dict[str, str] | None = None, mtls: bool = False
) -> Iterator[tuple[str, TlsSaslProxy]]:
    """A Tansu broker behind a proxy (TLS when ``pki``, SASL when ``users``): yields (bootstrap, proxy)."""
    port = free_port()
    context = server_context(pki, require_client_cert=mtls) if pki else None
    with (
        TansuBehind(port) as tansu,
        TlsSaslProxy(tansu.port, port=port, ssl_context=context, users=users) as proxy,
    ):
        yield f"127.0.0.1:{port}", proxy


@pytest.fixture
def tls_broker(pki: Pki) -> Iterator[tuple[str, TlsSaslProxy]]:
    yield from front(pki)


@pytest.fixture
def mtls_broker(pki: Pki) -> Iterator[tuple[str, TlsSaslProxy]]:
    yield from front(pki, mtls=True)


@pytest.fixture
def sasl_broker() -> Iterator[tuple[str, TlsSaslProxy]]:
    yield from front(None, users=USERS)


@pytest.fixture
def sasl_ssl_broker(pki: Pki) -> Iterator[tuple[str, TlsSaslProxy]]:
    yield from front(pki, users=USERS)


async def roundtrip(bootstrap: str, security: KafkaSecurity, topic: str) -> None:
    """Create a topic, produce three records and read them back, every client with ``security``."""
    await ensure_topics(bootstrap, [topic], security=security, timeout=20)
    await produce(bootstrap, topic, [b"one", b"two", b"three"], security=security)
    records = await collect(bootstrap, [topic], until=lambda r: len(r) >= 3, timeout=30, security=security)
    assert [r.value for r in records] == [b"one", b"two", b"three"]


async def failure(bootstrap: str, security: KafkaSecurity) -> str:
    with pytest.raises(ConnectFailed) as info:
        await check_kafka(bootstrap, security, timeout=20)
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"Kafka {bootstrap} ({security.protocol}")
    return line


async def test_tls_verifies_the_broker_and_fails_clearly_on_an_unknown_ca(
    tls_broker: tuple[str, TlsSaslProxy], pki: Pki
) -> None:
    bootstrap, _ = tls_broker
    await roundtrip(bootstrap, KafkaSecurity(protocol="SSL", ca_file=str(pki.ca)), "tls-topic")
    line = await failure(bootstrap, KafkaSecurity(protocol="SSL", ca_file=str(pki.other_ca)))
    assert "TLS certificate not trusted" in line
    line = await failure(bootstrap, KafkaSecurity(protocol="SSL"))  # system CAs do not know the test CA
    assert "TLS certificate not trusted" in line
    line = await failure(bootstrap, KafkaSecurity())  # a plaintext client on the TLS port
    assert "is this a TLS listener?" in line


async def test_mutual_tls_needs_the_client_certificate(
    mtls_broker: tuple[str, TlsSaslProxy], pki: Pki
) -> None:
    bootstrap, _ = mtls_broker
    line = await failure(bootstrap, KafkaSecurity(protocol="SSL", ca_file=str(pki.ca)))
    assert "client certificate" in line  # TLS 1.3 reports the refusal only as the first read fails
    with_cert = KafkaSecurity(
        protocol="SSL", ca_file=str(pki.ca), cert_file=str(pki.client_cert), key_file=str(pki.client_key)
    )
    await roundtrip(bootstrap, with_cert, "mtls-topic")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
async def test_sasl_authenticates_and_a_wrong_password_fails_once(
    sasl_broker: tuple[str, TlsSaslProxy], mechanism: str
) -> None:
    bootstrap, proxy = sasl_broker
    good = KafkaSecurity(
        protocol="SASL_PLAINTEXT", mechanism=mechanism, username="eval-worker", password=USERS["eval-worker"]
    )
    await roundtrip(bootstrap, good, f"sasl-{mechanism.lower()}")
    assert proxy.authenticated and {m for m, _ in proxy.authenticated} == {mechanism}
    assert not proxy.failures
    bad = KafkaSecurity(
        protocol="SASL_PLAINTEXT", mechanism=mechanism, username="eval-worker", password="wrong-password"
    )
    line = await failure(bootstrap, bad)
    assert "authentication failed" in line and mechanism in line and "'eval-worker'" in line
    assert "wrong-password" not in line
    assert proxy.failures == [f"{mechanism} eval-worker"]  # one attempt, not a retry storm


async def test_ready_broker_check_authenticates(sasl_ssl_broker: tuple[str, TlsSaslProxy], pki: Pki) -> None:
    bootstrap, _ = sasl_ssl_broker
    base = {
        "protocol": "SASL_SSL",
        "mechanism": "SCRAM-SHA-512",
        "username": "eval-worker",
        "ca_file": str(pki.ca),
    }
    _, good = broker_check(bootstrap, KafkaSecurity(**base, password=USERS["eval-worker"]))  # type: ignore[arg-type]
    await good()
    _, bad = broker_check(bootstrap, KafkaSecurity(**base, password="nope"))  # type: ignore[arg-type]
    with pytest.raises(ConnectionError, match="SaslAuthenticationFailed"):
        await bad()
    _, plain = broker_check(bootstrap)  # a bare TCP connect would have said ready
    with pytest.raises(ConnectionError):
        await plain()


@pytest.fixture
def redis_tls(pki: Pki) -> Iterator[RedisTls]:
    with RedisTls(pki, user="eval", password="redis-secret-Bb2") as server:
        yield server


def redis_settings(
    server: RedisTls,
    pki: Pki,
    tmp_path: Path,
    *,
    password: str,
    url: str | None = None,
    ca: Path | None = None,
) -> Any:
    secret = tmp_path / f"redis-password-{uuid.uuid4().hex[:8]}"
    secret.write_text(password + "\n")  # as a mounted secret file is
    return load_settings(
        redis_url=url or server.url,
        redis_username="eval",
        redis_password_file=str(secret),
        redis_ssl_ca_file=str(ca or pki.ca),
    )


async def test_redis_tls_with_an_acl_user(redis_tls: RedisTls, pki: Pki, tmp_path: Path) -> None:
    settings = redis_settings(redis_tls, pki, tmp_path, password="redis-secret-Bb2")
    client = aioredis.Redis.from_url(redis_tls.url, **redis_options(settings))
    assert await client.ping()
    assert (await client.acl_whoami()) in ("eval", b"eval")
    await client.aclose()
    cases = [
        (redis_settings(redis_tls, pki, tmp_path, password="not-the-password"), "authentication failed"),
        (
            redis_settings(redis_tls, pki, tmp_path, password="redis-secret-Bb2", ca=pki.other_ca),
            "TLS certificate not trusted",
        ),
    ]
    for bad, expected in cases:
        client = aioredis.Redis.from_url(bad.redis_url, socket_connect_timeout=5, **redis_options(bad))
        with pytest.raises(ConnectFailed, match=expected) as info:
            await check_redis(client, bad.redis_url)
        assert "not-the-password" not in str(info.value) and "redis-secret" not in str(info.value)
        await client.aclose()
    plain_url = f"redis://127.0.0.1:{redis_tls.port}/0"  # a plaintext client on the TLS port
    client = aioredis.Redis.from_url(plain_url, socket_connect_timeout=5, socket_timeout=5)
    with pytest.raises(ConnectFailed, match="is this a TLS port"):
        await check_redis(client, plain_url)
    await client.aclose()


async def test_redis_cluster_over_tls_with_an_acl_user(pki: Pki, tmp_path: Path) -> None:
    with RedisTlsCluster(pki, user="eval", password="cluster-secret-Cc3") as cluster:
        good, bad = tmp_path / "good", tmp_path / "bad"
        good.write_text("cluster-secret-Cc3\n")
        bad.write_text("wrong-cluster-pw\n")
        for path, works in ((good, True), (bad, False)):
            settings = load_settings(
                redis_url=cluster.url,
                redis_username="eval",
                redis_password_file=str(path),
                redis_ssl_ca_file=str(pki.ca),
            )
            plain_url = cluster.url.replace(
                "rediss+cluster://", "rediss://"
            )  # what redis-py's cluster client takes
            client = RedisCluster.from_url(plain_url, **redis_options(settings))
            try:
                if works:
                    for i in range(30):  # keys on every node's slots
                        await client.set(f"k{i}", i)
                    assert [int(await client.get(f"k{i}")) for i in range(30)] == list(range(30))
                    assert len(client.get_nodes()) == 3
                else:
                    with pytest.raises(ConnectFailed, match="authentication failed") as info:
                        await check_redis(client, settings.redis_url)
                    assert "wrong-cluster-pw" not in str(info.value)
            finally:
                await client.aclose()


def worker_env(
    bootstrap: str, pki: Pki, redis: RedisTls, tmp_path: Path, *, kafka_password: str
) -> dict[str, str]:
    kafka_secret, redis_secret = tmp_path / "kafka-password", tmp_path / "redis-password"
    kafka_secret.write_text(kafka_password + "\n")
    redis_secret.write_text("redis-secret-Bb2\n")
    return {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "REDIS_URL": redis.url,
        "STREAMEVAL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "STREAMEVAL_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "STREAMEVAL_KAFKA_SASL_USERNAME": "eval-worker",
        "STREAMEVAL_KAFKA_SASL_PASSWORD_FILE": str(kafka_secret),
        "STREAMEVAL_KAFKA_SSL_CA_FILE": str(pki.ca),
        "STREAMEVAL_REDIS_USERNAME": "eval",
        "STREAMEVAL_REDIS_PASSWORD_FILE": str(redis_secret),
        "STREAMEVAL_REDIS_SSL_CA_FILE": str(pki.ca),
        "STREAMEVAL_MAX_EVENT_BYTES": str(MAX_EVENT_BYTES),
    }


async def test_worker_over_sasl_ssl_and_redis_tls_counts_exactly(
    sasl_ssl_broker: tuple[str, TlsSaslProxy],
    redis_tls: RedisTls,
    pki: Pki,
    tmp_path: Path,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
) -> None:
    bootstrap, proxy = sasl_ssl_broker
    env = worker_env(bootstrap, pki, redis_tls, tmp_path, kafka_password=USERS["eval-worker"])
    security = KafkaSecurity(
        protocol="SASL_SSL",
        mechanism="SCRAM-SHA-512",
        username="eval-worker",
        password=USERS["eval-worker"],
        ca_file=str(pki.ca),
    )
    events, valid_ids = make_events(190, 10, seed=5)
    await ensure_topics(bootstrap, topics.values(), partitions=2, security=security)
    await produce(bootstrap, topics["requests"], events, security=security)
    worker = start_worker(EXAMPLES / "suites.yaml", **env)
    out = [topics["results"], topics["deadletter"]]
    records = await collect(bootstrap, out, until=lambda r: len(r) >= 200, timeout=120, security=security)
    results = [r for r in records if r.topic == topics["results"]]
    assert len(results) == 190 and len(records) == 200
    assert {r.key.decode() for r in results if r.key} == valid_ids
    client = aioredis.Redis.from_url(
        redis_tls.url,
        **redis_options(
            load_settings(
                redis_url=redis_tls.url,
                redis_username="eval",
                redis_password="redis-secret-Bb2",
                redis_ssl_ca_file=str(pki.ca),
            )
        ),
    )
    totals = [
        hash_fields(await client.hgetall(key)).get("count", 0)
        async for key in client.scan_iter(match=f"{prefix}{{*}}:all")
        if not key.endswith(b"{dl}:all")
    ]  # all-time aggregates (streameval.keyspace)
    assert sum(int(t) for t in totals) == 190
    await client.aclose()
    assert worker.stop() == 0
    assert {m for m, _ in proxy.authenticated} == {"SCRAM-SHA-512"} and not proxy.failures
    log = worker.log()
    assert USERS["eval-worker"] not in log and "redis-secret-Bb2" not in log


@pytest.mark.parametrize("wrong", ["kafka", "redis"])
def test_worker_with_a_wrong_password_exits_with_one_line(
    wrong: str,
    sasl_ssl_broker: tuple[str, TlsSaslProxy],
    redis_tls: RedisTls,
    pki: Pki,
    tmp_path: Path,
    topics: dict[str, str],
) -> None:
    bootstrap, proxy = sasl_ssl_broker
    env = worker_env(
        bootstrap,
        pki,
        redis_tls,
        tmp_path,
        kafka_password="wrong-kafka-pw" if wrong == "kafka" else USERS["eval-worker"],
    )
    if wrong == "redis":
        (tmp_path / "redis-password").write_text("wrong-redis-pw\n")
    env = {
        **os.environ,
        **env,
        "STREAMEVAL_CONFIG": str(EXAMPLES / "suites.yaml"),
        **{f"STREAMEVAL_TOPIC_{k.upper()}": v for k, v in topics.items()},
    }
    done = subprocess.run(
        [sys.executable, "-m", "streameval", "worker"], env=env, capture_output=True, timeout=120
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 1, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    if wrong == "kafka":
        assert (
            f"Kafka {bootstrap} (SASL_SSL, SCRAM-SHA-512, user 'eval-worker'): authentication failed"
            in errors[0]
        )
        assert proxy.failures == ["SCRAM-SHA-512 eval-worker"]
    else:
        assert f"Redis {redis_tls.url}: authentication failed" in errors[0]
    assert "wrong-kafka-pw" not in output and "wrong-redis-pw" not in output and "Traceback" not in output
