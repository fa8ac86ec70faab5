"""Start-up and readiness checks of the Kafka and Redis connections, with one clear line on failure.

A wrong credential, an unknown CA or a plaintext client on a TLS port is not something a retry fixes:
:func:`check_kafka` and :func:`check_redis` raise :class:`~streameval.errors.ConnectFailed` naming the
server, the mechanism and the cause at once. A refused connection (a broker still starting) is retried
until ``timeout``. The Kafka check is an authenticated metadata request: the same connection, TLS
handshake and SASL exchange every client makes, so ``/ready`` fails on a wrong password too.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Literal

from aiokafka import errors as kafka_errors
from aiokafka.conn import create_conn
from aiokafka.protocol.metadata import MetadataRequest
from redis import exceptions as redis_errors

from . import keyspace
from ._util import redact_url
from .errors import BrokerUnavailable, ConnectFailed
from .kafka_security import KafkaSecurity, bootstrap_hosts

__all__ = [
    "check_kafka",
    "check_redis",
    "check_redis_settings",
    "kafka_metadata",
    "kafka_reason",
    "redis_reason",
]

#: how a failed connection attempt is treated: give up now, count towards the closed-connection limit, or retry
FailureKind = Literal["permanent", "closed", "transient"]
log = logging.getLogger(__name__)

_RETRY_S = 0.5
_WAIT_SUMMARY_S = 10.0  # while waiting for a broker, one progress line this often
#: a connection closed during the first request is what a TLS or SASL listener does to the wrong client,
#: but also what a load balancer without ready backends does: stop after this many in a row
_CLOSED_LIMIT = 3


def _tls_reason(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({exc.verify_message}); check the CA file and the host name"
    reason = exc.reason or str(exc)
    if reason == "WRONG_VERSION_NUMBER":
        return "TLS handshake failed (WRONG_VERSION_NUMBER): the server does not speak TLS on this port"
    if "ALERT" in reason:
        return f"TLS handshake refused by the server ({reason}); a client certificate may be required or rejected"
    return f"TLS handshake failed ({reason})"


def kafka_reason(exc: BaseException, security: KafkaSecurity) -> tuple[str, FailureKind]:
    """(why, verdict) for a failed Kafka connection: ``permanent`` failures are not retried, ``closed`` ones
    (the connection closed during the first request) ``_CLOSED_LIMIT`` times, ``transient`` ones until the timeout."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, ssl.SSLError):
        return _tls_reason(exc), "permanent"
    if isinstance(cause, ssl.SSLError):
        return _tls_reason(cause), "permanent"
    if isinstance(exc, kafka_errors.SaslAuthenticationFailed | kafka_errors.IllegalSaslStateError):
        return f"authentication failed: {exc}", "permanent"
    if isinstance(exc, kafka_errors.UnsupportedSaslMechanismError):
        return f"the broker does not offer this SASL mechanism: {exc}", "permanent"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused", "transient"
    if isinstance(
        exc, kafka_errors.KafkaConnectionError | ConnectionResetError | asyncio.IncompleteReadError
    ):
        if not security.tls:
            return (
                "connection closed during the first request: is this a TLS listener? "
                "(set STREAMEVAL_KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL)"
            ), "closed"
        hints = [
            h
            for h, missing in (
                ("a client certificate (STREAMEVAL_KAFKA_SSL_CERT_FILE)", not security.cert_file),
                ("SASL (SASL_SSL)", not security.sasl),
            )
            if missing
        ]
        hint = f": does the listener require {' or '.join(hints)}?" if hints else ""
        return f"connection closed by the server during the first request{hint}", "closed"
    if isinstance(exc, TimeoutError | kafka_errors.KafkaTimeoutError | kafka_errors.RequestTimedOutError):
        hint = " (a plaintext client on a TLS port waits like this)" if not security.tls else ""
        return f"no answer in time{hint}", "transient"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or exc}", "transient"
    return f"{type(exc).__name__}: {exc}", "permanent"  # nothing a retry would fix


async def kafka_metadata(host: str, port: int, security: KafkaSecurity, *, timeout: float) -> int:
    """Connect to one broker as every client does (TLS, SASL) and ask for metadata; returns the broker count."""
    kwargs = security.aiokafka_kwargs()
    conn = await asyncio.wait_for(
        create_conn(
            host, port, request_timeout_ms=int(timeout * 1000), client_id="streameval-check", **kwargs
        ),
        timeout,
    )
    try:
        response = await asyncio.wait_for(conn.send(MetadataRequest([])), timeout)
        return len(response.brokers)
    finally:
        conn.close()


async def check_kafka(
    bootstrap: str, security: KafkaSecurity, *, timeout: float = 30.0, attempt_s: float = 10.0
) -> None:
    """Return once a bootstrap server answers an authenticated metadata request.

    Raises :class:`ConnectFailed` at once when the broker refuses us (credentials, TLS), and
    :class:`BrokerUnavailable` when none answered within ``timeout``."""
    started = time.monotonic()
    deadline, next_summary, rounds = started + timeout, started + _WAIT_SUMMARY_S, 0
    hosts = bootstrap_hosts(bootstrap)
    closed: dict[str, int] = {}
    while True:
        rounds += 1
        failures: list[str] = []
        for entry in hosts:
            host, _, port = entry.rpartition(":")
            try:
                await kafka_metadata(host, int(port), security, timeout=attempt_s)
                return
            except Exception as exc:  # classified: permanent ones end the start, the rest are retried
                why, verdict = kafka_reason(exc, security)
                line = f"Kafka {entry} ({security.describe()}): {why}"
                closed[entry] = closed.get(entry, 0) + 1 if verdict == "closed" else 0
                if verdict == "permanent" or closed[entry] >= _CLOSED_LIMIT:
                    raise ConnectFailed(line) from None
                failures.append(line)
        now = time.monotonic()
        if now + _RETRY_S > deadline:  # nothing refused us, nothing answered: the broker is not there
            raise BrokerUnavailable(
                f"no Kafka broker answered at {bootstrap} in {now - started:.0f} s ({rounds} attempts): "
                f"{'; '.join(failures)}; is it running? (set KAFKA_BOOTSTRAP_SERVERS or pass --bootstrap)"
            )
        if now >= next_summary:
            log.warning(
                "still waiting for a Kafka broker at %s: %d attempts in %.0f s, giving up after %.0f s",
                bootstrap,
                rounds,
                now - started,
                timeout,
            )
            next_summary = now + _WAIT_SUMMARY_S
        await asyncio.sleep(_RETRY_S)


def redis_reason(exc: BaseException, url: str) -> tuple[str, bool]:
    """(why, permanent) for a failed Redis connection."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, redis_errors.RedisClusterException) and cause is not None:  # no node reachable: why
        return redis_reason(cause, url)
    for err in (exc, cause):
        if isinstance(err, ssl.SSLError):
            return _tls_reason(err), True
    if isinstance(exc, redis_errors.AuthenticationError | redis_errors.AuthenticationWrongNumberOfArgsError):
        return f"authentication failed ({exc})", True
    if isinstance(exc, redis_errors.ResponseError) and "NOAUTH" in str(exc).upper():
        return "the server requires a password (NOAUTH); set STREAMEVAL_REDIS_PASSWORD(_FILE)", True
    if isinstance(exc, redis_errors.NoPermissionError):
        return f"the ACL user may not run this command ({exc})", True
    closed = isinstance(cause, ConnectionResetError | BrokenPipeError) or "closed by server" in str(
        exc
    )  # redis-py has no type for the latter
    if (
        isinstance(exc, redis_errors.ConnectionError)
        and closed
        and not url.startswith(("rediss:", "rediss+"))
    ):
        return "connection closed during the first command: is this a TLS port? (use a rediss:// URL)", True
    if isinstance(exc, redis_errors.ConnectionError | redis_errors.TimeoutError | OSError):
        return f"{type(exc).__name__}: {exc}", False
    return f"{type(exc).__name__}: {exc}", False


async def check_redis(client: keyspace.Client, url: str) -> None:
    """PING once; a permanent failure (credentials, TLS) raises :class:`ConnectFailed`, others pass through."""
    try:
        await client.ping()
    except Exception as exc:
        why, permanent = redis_reason(exc, url)
        if permanent:
            raise ConnectFailed(f"Redis {redact_url(url)}: {why}") from None
        raise


async def check_redis_settings(url: str, options: dict[str, object], *, timeout: float = 5.0) -> None:
    """:func:`check_redis` on a short-lived client for ``url`` with ``options`` (streameval.redis_security)."""
    client = keyspace.connect(
        url, max_connections=2, socket_timeout=timeout, connect_timeout=timeout, **options
    )
    try:
        await check_redis(client, url)
    except ConnectFailed:
        raise
    except Exception:  # a transient failure: the worker's own retry loop waits it out
        return
    finally:
        await client.aclose()
