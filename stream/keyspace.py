"""The Redis keyspace: every key name, the client factory and the one transient-error guard.

Keys are laid out for Redis Cluster: each key carries a hash tag (``{...}``) naming the slot it lives
in, and every Lua script (streameval._lua) touches keys of one tag only. ``P`` is the prefix
(``STREAMEVAL_REDIS_PREFIX``), ``T`` a model × suite pair ``{model:suite}`` (each URL-quoted):

==================================  ================================================================
``P{T}:all``                        all-time aggregate hash (TTL ``all_time_ttl_s``, renewed by writes)
``P{T}:w:{size}:{start}``           one tumbling window's aggregate hash (TTL ``window_ttl_s``)
``P{T}:closed:{size}:{start}``      the window is closed: its late events go to the open window
``P{T}:mk:{gen}``                   idempotency marks: hash of digest buckets (replay horizon)
``P{T}:mk:{gen}:{shard}``           marks of the previous layout (read only until they expire)
``P{T}:rb:{gen}:{token}``           the encoded results of one record call, concatenated (redelivery horizon)
``P{T}:res:{gen}``                  encoded results by digest (the previous layout; read only)
``P{T}:alert:{rule}:{size}:{start}``  an alert's claim; ``P{T}:cool:{rule}`` its cooldown
``P{T}:ex:{kind}:{size}:{start}``   a window's examples: zset of compact results, ``worst`` (score: the
                                    result's score) or ``failing`` (score: event time); bounded, TTL
                                    ``example_ttl_s`` (at most ``window_ttl_s``)
``P{T}:rid:{gen}``                  result id -> pointer: digest, offset, length, ``rb`` key (redelivery horizon)
``P{ix}:pairs``                     zset of pairs (score: last seen); at most ``max_pairs``
``P{ix}:wp:{size}:{start}``         set of pairs with data in a window (the closer's index)
``P{ix}:open:{size}``               zset of windows with data not yet published
``P{ix}:win:{size}``                zset of windows with data (the dashboard's index)
``P{ix}:lease:{size}:{start}``      a window's publishing lease
``P{ix}:alerts:recent``             list of the last alerts published (bounded)
``P{dl}:all`` / ``P{dl}:w:{size}:{start}``  dead-letter counts by kind; ``P{dl}:win:{size}`` index
``P{dl}:seen:{gen}:{topic}:{part}``  offsets of dead letters already counted
``P{dlraw}:{sha256}`` ``:index`` ``:bytes``  whole events of truncated dead letters, within a budget
``P{registry}:ev:{id}`` ``:names`` ``:rev``  custom evaluators; channel ``P{registry}:changes``
``P{lj:S}:b:{bucket}:{gen}``         verdicts kept for the human-label join (streameval.labels); ``P{lj}:layouts``
``P{T}:hl:all`` / ``P{T}:hl:{size}:{start}``  joined human labels of a pair; ``P{lpend}:q`` / ``:d`` waiting labels
``P{T}:rv:{minute}``                review items sent this minute (streameval.review)
``P judge:...``                     judge answers (streameval.judges._cache), one slot per key
``P judge_spend:{judge}:{hour}``    a judge's money spent in one UTC clock hour (one key per command)
==================================  ================================================================

A URL ``redis+cluster://host:port`` (or ``rediss+cluster://``) connects to a Redis Cluster through
redis-py's cluster client, which follows MOVED and ASK; anything the client gives up on (TRYAGAIN,
CLUSTERDOWN, a failover in progress, a lost connection) becomes :class:`StoreUnavailable`, which the
worker waits out and retries: never skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from .errors import ConfigError, StoreUnavailable

__all__ = [
    "OVERFLOW_MODEL",
    "TRANSIENT",
    "Client",
    "Keys",
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

#: the model label of pairs beyond ``max_pairs`` (their suite is kept)
OVERFLOW_MODEL = "(overflow)"

#: errors that mean "Redis cannot answer now": the caller waits and tries again
TRANSIENT: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError,
    redis_errors.ClusterDownError, redis_errors.TryAgainError, redis_errors.ReadOnlyError,
    redis_errors.AskError, redis_errors.ClusterError, redis_errors.RedisClusterException,
    redis_errors.MaxConnectionsError, OSError,
)  # fmt: skip


async def guard(call: Awaitable[T]) -> T:
    """``await call``, with Redis's transient errors raised as :class:`StoreUnavailable`."""
    try:
        return await call
    except TRANSIENT as exc:
        raise StoreUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def connect(
    url: str, *, max_connections: int = 64, socket_timeout: float = 10, connect_timeout: float = 5, **options: Any
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
        return RedisCluster.from_url(plain, max_connections=max_connections, socket_timeout=socket_timeout,
                                     socket_connect_timeout=connect_timeout, **options)  # fmt: skip
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"REDIS_URL: unsupported scheme {scheme!r}; use redis://, rediss://, unix:// "
                          "or redis+cluster:// for a Redis Cluster")  # fmt: skip
    pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=30,
                                                    socket_timeout=socket_timeout,
                                                    socket_connect_timeout=connect_timeout, **options)  # fmt: skip
    return aioredis.Redis(connection_pool=pool)


async def ping(client: Client, url: str) -> None:
    """Check that Redis answers and is in the mode ``url`` says (one node or a cluster).

    Raises :class:`StoreUnavailable` while it does not answer (the worker waits), :class:`ConfigError`
    when the mode is wrong: a cluster behind ``redis://`` would answer MOVED to most keys.
    """
    from ._util import redact_url

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
    return list(await client.mget(list(keys)))


async def run_scripts(client: Client, calls: Sequence[tuple[AsyncScript, list[str], list[Any]]], *,
                      writes: Sequence[tuple[Any, ...]] = ()) -> list[Any]:  # fmt: skip
    """Run script calls in one pipeline: one round trip on one node, one per node (in parallel) on a cluster.

    ``writes`` (plain commands, e.g. a SET) go first in the same pipeline: on one connection per node, so
    a script that follows sees them; their replies are checked, not returned. A script the server does
    not know (a restarted or newly promoted node) is loaded and run again. On a cluster, redis-py's
    pipeline sends a call that meets MOVED, ASK or TRYAGAIN again on its own.
    """
    if not calls and not writes:
        return []
    async with client.pipeline(transaction=False) as pipe:  # type: ignore[union-attr]
        for command in writes:
            pipe.execute_command(*command)
        for script, keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)  # a cluster pipeline blocks .evalsha
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


class Keys:
    """Every key name under one prefix (module docstring)."""

    def __init__(self, prefix: str = "streameval:") -> None:
        if "{" in prefix or "}" in prefix:
            raise ConfigError(
                f"STREAMEVAL_REDIS_PREFIX must not contain braces (Redis Cluster hash tags); got {prefix!r}"
            )
        self.prefix = prefix
        self.ix = f"{prefix}{{ix}}:"
        self.dl = f"{prefix}{{dl}}:"
        self.registry = f"{prefix}{{registry}}:"

    # -- a model × suite pair (one slot each) -------------------------------------------------------
    @staticmethod
    def pair_id(model: str, suite: str) -> str:
        """``model:suite``, each URL-quoted (no ``{``, ``}`` or ``:`` inside): the pair's hash tag."""
        return f"{quote(model, safe='')}:{quote(suite, safe='')}"

    @staticmethod
    def split_pair(pair: str) -> tuple[str, str]:
        model, _, suite = pair.partition(":")
        return unquote(model), unquote(suite)

    def pair(self, pair: str) -> str:
        return f"{self.prefix}{{{pair}}}:"

    def all_time(self, pair: str) -> str:
        return self.pair(pair) + "all"

    def window(self, pair: str, size: int, start: int) -> str:
        return f"{self.pair(pair)}w:{size}:{start}"

    def closed(self, pair: str, size: int, start: int) -> str:
        return f"{self.pair(pair)}closed:{size}:{start}"

    def marks(self, pair: str, generation: int) -> str:
        return f"{self.pair(pair)}mk:{generation}"

    def legacy_marks(self, pair: str, generation: int, shard: int) -> str:
        """Marks written before the digest buckets (read only, until they expire; streameval.store)."""
        return f"{self.pair(pair)}mk:{generation}:{shard}"

    def results(self, pair: str, generation: int) -> str:
        """Encoded results by digest, as the previous layout kept them (read only, until they expire)."""
        return f"{self.pair(pair)}res:{generation}"

    def result_blob(self, pair: str, suffix: str) -> str:
        """The encoded results of one record call; ``suffix`` is ``{generation}:{token}`` (streameval.store)."""
        return f"{self.pair(pair)}rb:{suffix}"

    def alert_claim(self, pair: str, rule: str, size: int, start: str) -> str:
        return f"{self.pair(pair)}alert:{quote(rule, safe='')}:{size}:{start}"

    def cooldown(self, pair: str, rule: str) -> str:
        return f"{self.pair(pair)}cool:{quote(rule, safe='')}"

    def examples(self, pair: str, kind: str, size: int, start: int) -> str:
        """A window's examples, ``kind`` ``worst`` or ``failing`` (streameval.drilldown)."""
        return f"{self.pair(pair)}ex:{kind}:{size}:{start}"

    def result_ids(self, pair: str, generation: int) -> str:
        """Result id -> pointer to its encoded result (streameval.store), redelivery generation ``generation``."""
        return f"{self.pair(pair)}rid:{generation}"

    # -- indexes (one slot) ---------------------------------------------------------------------------
    @property
    def pairs(self) -> str:
        return self.ix + "pairs"

    def window_pairs(self, size: int, start: int) -> str:
        return f"{self.ix}wp:{size}:{start}"

    def open_windows(self, size: int) -> str:
        return f"{self.ix}open:{size}"

    def windows(self, size: int) -> str:
        return f"{self.ix}win:{size}"

    def lease(self, size: int, start: int) -> str:
        return f"{self.ix}lease:{size}:{start}"

    @property
    def recent_alerts(self) -> str:
        return self.ix + "alerts:recent"

    # -- dead letters (one slot) ----------------------------------------------------------------------
    @property
    def dead_letters_all(self) -> str:
        return self.dl + "all"

    def dead_letters(self, size: int, start: int) -> str:
        return f"{self.dl}w:{size}:{start}"

    def dead_letter_windows(self, size: int) -> str:
        return f"{self.dl}win:{size}"

    def dead_letter_seen(self, generation: int, topic: str, partition: str) -> str:
        return f"{self.dl}seen:{generation}:{quote(topic, safe='')}:{partition}"

    # -- whole events of truncated dead letters (one slot; streameval.deadletters) -------------------
    def dead_letter_raw(self, sha256: str) -> str:
        return f"{self.prefix}{{dlraw}}:{sha256}"

    @property
    def dead_letter_raw_index(self) -> str:
        return f"{self.prefix}{{dlraw}}:index"

    @property
    def dead_letter_raw_bytes(self) -> str:
        return f"{self.prefix}{{dlraw}}:bytes"

    # -- registry (one slot) --------------------------------------------------------------------------
    def registry_record(self, evaluator_id: str) -> str:
        return f"{self.registry}ev:{evaluator_id}"

    @property
    def registry_names(self) -> str:
        return self.registry + "names"

    @property
    def registry_rev(self) -> str:
        return self.registry + "rev"

    @property
    def registry_channel(self) -> str:
        return self.registry + "changes"

    # -- judge cache and budgets (spread over slots) ------------------------------------------------
    def judge(self, judge: str, model: str, version: str, digest: str) -> str:
        return f"{self.prefix}judge:{quote(judge, safe='')}:{quote(model, safe='')}:v{version}:{digest}"

    def judge_spend(self, judge: str, hour: int) -> str:
        """A judge's spend in one clock hour (streameval.judges._budget); INCRBYFLOAT and GET only."""
        return f"{self.prefix}judge_spend:{quote(judge, safe='')}:{hour}"


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
