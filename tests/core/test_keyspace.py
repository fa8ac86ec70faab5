"""The keyspace: every script's keys share one hash slot; client factory; the transient-error guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pytest
import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster
from redis.cluster import key_slot

from streameval import _lua, keyspace
from streameval.alerts import AlertRule
from streameval.deadletters import RawStore
from streameval.errors import ConfigError, StoreUnavailable
from streameval.features.drilldown import ExamplesRecorder
from streameval.features.embedding_drift import KEY as DRIFT
from streameval.features.embedding_drift import DriftRecorder, DriftSample, EmbeddingDriftConfig
from streameval.migrate import migrate_marks
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.outputs import Publish
from streameval.registry import CodeConfig, RegistryStore
from streameval.store import Receipt, ResultStore
from streameval.windows import WindowCloser

T0 = 1_800_000_000


def result(i: int, model: str, suite: str, at: float) -> GradedResult:
    return GradedResult(
        id=f"e{i}",
        model=model,
        suite=suite,
        score=0.5,
        passed=False,
        threshold=0.6,
        grade="fail",
        evaluators=[EvaluatorResult(name="ev", score=0.5, passed=False, weight=1)],
        event_time=format_time(at),
        evaluated_at=format_time(at),
        latency_ms=1.0,
        pipeline_version="t",
    )


async def test_every_script_touches_one_hash_slot(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drive every path that runs a script; each call's keys must map to one slot (no CROSSSLOT possible)."""
    seen: dict[str, list[list[str]]] = {}
    written: list[str] = []
    real = keyspace.run_scripts
    # the record script with every feature block that adds keys to it (embedding drift, drill-down examples)
    recorders = [
        DriftRecorder(EmbeddingDriftConfig.model_construct(window=10, features=16, reservoir=2)),
        ExamplesRecorder(),
    ]
    scripts = [name for name in _lua.__all__ if name.isupper() and name != "RECORD_CORE"]
    by_sha = {aredis.register_script(getattr(_lua, name)).sha: name for name in scripts}
    by_sha[aredis.register_script(_lua.record_script([(r.name, r.lua) for r in recorders])).sha] = "RECORD"

    async def checked(
        client: Any,
        calls: Sequence[tuple[Any, list[str], list[Any]]],
        *,
        writes: Sequence[tuple[Any, ...]] = (),
    ) -> list[Any]:
        for script, keys, _ in calls:
            seen.setdefault(by_sha[script.sha], []).append(keys)
        for command in writes:  # plain commands sent with the scripts: one key each
            assert command[0] == "SET", command
            written.append(command[1])
        return await real(client, calls, writes=writes)

    for module in (
        "streameval.store",
        "streameval.windows",
        "streameval.registry",
        "streameval.deadletters",
        "streameval.migrate",
    ):
        monkeypatch.setattr(f"{module}.run_scripts", checked)
    now = [T0 + 1.0]
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(10, 60),
        allowed_lateness_s=1,
        max_pairs=2,
        clock=lambda: now[0],
        recorders=recorders,
    )

    def drift(
        i: int,
    ) -> dict[str, DriftSample]:  # an outcome's annotations, embedding drift's sample among them
        numbers = np.array([1, 5, *range(4), *range(16)], dtype=np.int64)
        return {DRIFT: DriftSample(numbers, i, b"\0\0\x80?" + bytes(4))}

    models = ["a", "b{x}", "c:d", "e/f"]  # braces and colons must not leak into hash tags
    items: list[Any] = [
        (result(i, models[i % 4], f"s{i % 3}", T0 + i), b"r", None, b"", drift(i)) for i in range(24)
    ]
    receipt = Receipt()
    await store.record_many(
        items, [("schema", "t:0:1", T0), ("invalid_json", "t:1:7", T0 + 30)], receipt=receipt
    )
    store.published([receipt])
    await store.record_many(items[:3])  # duplicates; the published marks of their pairs ride along
    assert await store.flush_published(0) > 0  # the other pairs' on their own
    now[0] = T0 + 200.0
    # redirected to the open window
    await store.record_many([(result(99, "a", "s0", T0 + 2), b"late", None, b"", drift(99))])

    async def clock() -> float:
        return now[0]

    rule = AlertRule(name="low", metric="mean_score", comparator="<", threshold=0.9, window=10, min_count=1)
    sent: list[tuple[str, bytes]] = []

    async def send(message: Publish) -> None:
        sent.append((message.kind, message.value))

    assert await WindowCloser(store, [rule], allowed_lateness_s=1, clock=clock).run_once(send) > 0
    assert any(kind == "alert" for kind, _ in sent)
    registry = RegistryStore(aredis, prefix=prefix)
    record = await registry.create(
        name="x", description=None, config=CodeConfig(language="python", code="def evaluate(a): return 1")
    )
    await registry.delete(record)
    assert (
        await RawStore(aredis, prefix=prefix, ttl_s=60, budget_bytes=1000).keep(b"x" * 10, "ab" * 32)
        is not None
    )

    await migrate_marks(aredis, store.keys, seen_ttl_s=store.seen_ttl_s, now=now[0])
    assert sorted(seen) == sorted([*scripts, "RECORD"]), (
        "a script is never exercised here: add its path to this test"
    )
    for name, calls in seen.items():
        for keys in calls:
            assert keys, name
            assert len({key_slot(k.encode()) for k in keys}) == 1, (name, keys)
    assert any(":ed:10:" in k for keys in seen["RECORD"] for k in keys)  # the drift block was exercised
    assert any(":ex:worst:" in k for keys in seen["RECORD"] for k in keys)  # and the examples' block
    # the encoded results, written before the record calls: each in the slot of a record call's keys
    assert written and {key_slot(k.encode()) for k in written} <= {
        key_slot(keys[0].encode()) for keys in seen["RECORD"]
    }


@pytest.mark.parametrize("prefix", ["a{b}:", "x}"])
def test_a_prefix_with_braces_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="braces"):
        keyspace.Keys(prefix)


def test_pair_tags_quote_what_would_break_them() -> None:
    keys = keyspace.Keys("p:")
    pair = keys.pair_id("m{1}", "s:u")
    assert keys.all_time(pair) == "p:{m%7B1%7D:s%3Au}:all"
    assert keys.split_pair(pair) == ("m{1}", "s:u", "")
    versioned = keys.pair_id("m{1}", "s:u", "0123456789ab")
    assert keys.all_time(versioned) == "p:{m%7B1%7D:s%3Au:0123456789ab}:all"
    assert keys.split_pair(versioned) == ("m{1}", "s:u", "0123456789ab")


def test_urls_pick_the_client() -> None:
    assert isinstance(keyspace.connect("redis+cluster://127.0.0.1:7000"), RedisCluster)
    assert isinstance(keyspace.connect("redis://127.0.0.1:6379/0"), aioredis.Redis)
    with pytest.raises(ConfigError, match="redis\\+cluster://"):
        keyspace.connect("http://127.0.0.1:6379")


async def test_a_cluster_url_to_a_single_node_is_a_config_error(redis_url: str) -> None:
    host_port = redis_url.split("://", 1)[1].split("/", 1)[0]
    with pytest.raises(ConfigError, match="not a cluster"):
        await keyspace.preflight(f"redis+cluster://{host_port}")


@pytest.mark.parametrize(
    "error",
    [
        redis_errors.ConnectionError("x"),
        redis_errors.TimeoutError("x"),
        redis_errors.TryAgainError("x"),
        redis_errors.ClusterDownError("x"),
        redis_errors.MasterDownError("x"),
        redis_errors.ReadOnlyError("x"),
        redis_errors.MovedError("1 127.0.0.1:1"),
        redis_errors.BusyLoadingError("x"),
    ],
)
async def test_transient_errors_become_store_unavailable(error: Exception) -> None:
    async def fail() -> None:
        raise error

    with pytest.raises(StoreUnavailable, match="Redis unavailable"):
        await keyspace.guard(fail())


async def test_other_errors_are_not_hidden() -> None:
    async def crossslot() -> None:
        raise redis_errors.ResponseError("CROSSSLOT Keys in request don't hash to the same slot")

    with pytest.raises(redis_errors.ResponseError):
        await keyspace.guard(crossslot())


async def test_a_script_unknown_to_the_server_is_loaded_and_run(aredis: aioredis.Redis, prefix: str) -> None:
    script = aredis.register_script(
        f"-- {prefix}\nreturn ARGV[1]"
    )  # never loaded: as on a newly promoted node
    assert await keyspace.run_scripts(aredis, [(script, [f"{prefix}k"], [orjson.dumps(1)])]) == [b"1"]
