"""The Redis client: the factory (one node or a cluster), the one transient-error guard, script calls
in one pipeline and the retry loop that waits out an outage.

A URL ``redis+cluster://host:port`` (or ``rediss+cluster://``) connects to a Redis Cluster through
redis-py's cluster client, which follows MOVED and ASK; anything the client gives up on (TRYAGAIN,
CLUSTERDOWN, a failover in progress, a lost connection) becomes :class:`StoreUnavailable`, which the
worker waits out and retries: never skipped. Key names: :mod:`streameval.keyspace`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from ._util import redact_url
from .errors import ConfigError, StoreUnavailable

__all__ = [
    "TRANSIENT",
    "Client",
    "connect",
    "guard",
    "is_cluster",
    "mget",
    "ping",
    "preflight",
    "retry_forever",
    "run_scripts",
]

T = TypeVar("T")
log = logging.getLogger(__name__)
Client = aioredis.Redis | RedisCluster


#: errors that mean "Redis cannot answer now": the caller waits and tries again
TRANSIENT: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.BusyLoadingError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.ReadOnlyError,
    redis_errors.AskError,
    redis_errors.ClusterError,
    redis_errors.RedisClusterException,
    redis_errors.MaxConnectionsError,
    OSError,
)


async def guard(call: Awaitable[T]) -> T:
    """``await call``, with Redis's transient errors raised as :class:`StoreUnavailable`."""
    try:
        return await call
    except TRANSIENT as exc:
        raise StoreUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def connect(
    url: str,
    *,
    max_connections: int = 64,
    socket_timeout: float = 10,
    connect_timeout: float = 5,
    **options: Any,
) -> Client:
    """A client for ``url``: ``redis://`` / ``rediss://`` / ``unix://`` one node, ``redis+cluster://`` a cluster.

    One node: a blocking pool, so that thousands of waiting reads queue for a connection instead of
    failing. A cluster: redis-py's :class:`RedisCluster` (``max_connections`` per node). ``options`` go
    to redis-py as they are (TLS files, ACL credentials: streameval.redis_security.redis_options).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("redis+cluster", "rediss+cluster"):
        plain = urlunsplit((scheme.split("+")[0], *parts[1:]))
        return RedisCluster.from_url(
            plain,
            max_connections=max_connections,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            **options,
        )
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(
            f"REDIS_URL: unsupported scheme {scheme!r}; use redis://, rediss://, unix:// "
            "or redis+cluster:// for a Redis Cluster"
        )
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=30,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        **options,
    )
    return aioredis.Redis(connection_pool=pool)


async def ping(client: Client, url: str) -> None:
    """Check that Redis answers and is in the mode ``url`` says (one node or a cluster).

    Raises :class:`StoreUnavailable` while it does not answer (the worker waits), :class:`ConfigError`
    when the mode is wrong: a cluster behind ``redis://`` would answer MOVED to most keys.
    """
    try:
        info = await client.info("cluster")
    except redis_errors.RedisClusterException as exc:
        if "cluster mode is not enabled" in str(exc).lower():  # redis-py's only signal for this case
            raise ConfigError(
                f"REDIS_URL {redact_url(url)}: this Redis is not a cluster; use redis://"
            ) from exc
        raise StoreUnavailable(f"Redis at {redact_url(url)} did not answer: {exc}") from exc
    except TRANSIENT as exc:
        raise StoreUnavailable(f"Redis at {redact_url(url)} did not answer: {exc}") from exc
    if not is_cluster(client) and int(info.get("cluster_enabled", 0)):
        raise ConfigError(f"REDIS_URL {redact_url(url)}: this Redis is a cluster node; use redis+cluster://")


async def preflight(url: str, **options: Any) -> None:
    """At start: a wrong Redis mode (cluster or not) is a :class:`ConfigError`; an outage is waited out later."""
    client = connect(url, max_connections=2, **options)
    try:
        await ping(client, url)
    except StoreUnavailable:
        pass
    finally:
        await client.aclose()


async def mget(client: Client, keys: Sequence[str]) -> list[bytes | None]:
    """GET of many keys; on a cluster split by slot (keys of different slots cannot share an MGET)."""
    if is_cluster(client):
        return list(await client.mget_nonatomic(list(keys)))  # type: ignore[union-attr]
    return cast(list[bytes | None], await client.mget(list(keys)))


async def run_scripts(
    client: Client,
    calls: Sequence[tuple[AsyncScript, list[str], list[Any]]],
    *,
    writes: Sequence[tuple[Any, ...]] = (),
) -> list[Any]:
    """Run script calls in one pipeline: one round trip on one node, one per node (in parallel) on a cluster.

    ``writes`` (plain commands, e.g. a SET) go first in the same pipeline: on one connection per node, so
    a script that follows sees them; their replies are checked, not returned. A script the server does
    not know (a restarted or newly promoted node) is loaded and run again. On a cluster, redis-py's
    pipeline sends a call that meets MOVED, ASK or TRYAGAIN again on its own.
    """
    if not calls and not writes:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for command in writes:
            pipe.execute_command(*command)
        for script, keys, args in calls:
            pipe.execute_command(
                "EVALSHA", script.sha, len(keys), *keys, *args
            )  # a cluster pipeline blocks .evalsha
        replies = await pipe.execute(raise_on_error=False)
    for reply in replies[: len(writes)]:
        if isinstance(reply, Exception):
            raise reply
    replies = replies[len(writes) :]
    for i, reply in enumerate(replies):
        if isinstance(reply, redis_errors.NoScriptError):
            script, keys, args = calls[i]
            replies[i] = await script(keys=keys, args=args)
        elif isinstance(reply, Exception):
            raise reply
    return list(replies)


async def retry_forever(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    first_delay: float = 0.1,
    max_delay: float = 5.0,
) -> T:
    """Run ``call`` until it stops raising :class:`StoreUnavailable`, with capped exponential backoff.

    The worker uses this around Redis so that an outage (or a cluster failover) stalls the stream
    (offsets are not committed past unrecorded events) instead of losing or double-counting anything.
    """
    delay = first_delay
    failures = 0
    while True:
        try:
            return await call()
        except StoreUnavailable as exc:
            failures += 1
            log.warning("%s failed (%d in a row), retrying in %.1fs: %s", what, failures, delay, exc)
            await asyncio.sleep(delay)
            delay = min(max_delay, delay * 2)
