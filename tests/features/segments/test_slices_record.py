"""Slices (docs/segments.md): the suite file's ``segments:``, each event's value per dimension, and the figures
kept per slice in the pair's one record call, on real Redis: exactly once with the pair's marks, capped per
dimension, pair and window, late events following the pair's redirect."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.feature import SLICES
from streameval.features.segments import INVALID, MISSING, OTHER, SlicesAnnotator, SlicesRecorder
from streameval.features.setup import annotators, enabled, record_plugins
from streameval.models import RequestEvent, format_time
from streameval.pipeline import Pipeline
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.store_codec import slice_figures

T0 = 1_800_000_000  # a window boundary for 10 s windows
SIZE = 10
SUITE = {"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}


def config(**segments: Any) -> dict[str, Any]:
    return {"suites": [SUITE], "segments": {"dimensions": {"tier": "metadata.tier"}, **segments}}


def event(i: int, tier: Any, *, output: str = "Paris", at: float = T0 + 1, **extra: Any) -> bytes:
    metadata = {} if tier is None else {"tier": tier}
    return orjson.dumps(
        {
            "id": f"e{i}",
            "model": "m1",
            "output": output,
            "expected": "Paris",
            "timestamp": format_time(at),
            "metadata": metadata,
            **extra,
        }
    )


class World:
    def __init__(self, client: aioredis.Redis, prefix: str, data: dict[str, Any], clock: list[float]) -> None:
        _, self.suites = parse_config(data)
        self.pipeline = Pipeline(self.suites, annotators=annotators(self.suites))
        on = enabled(Settings(), self.suites)
        self.store = ResultStore(
            client,
            prefix=prefix,
            windows=(SIZE,),
            allowed_lateness_s=3.0,
            clock=lambda: clock[0],
            recorders=record_plugins(on),
        )

    async def record(self, *raws: bytes) -> list[bytes | None]:
        items: list[Any] = []
        for raw in raws:
            outcome = await self.pipeline.process(raw)
            assert outcome.result is not None
            items.append(
                (outcome.result, outcome.result.model_dump_json().encode(), None, raw, outcome.annotations)
            )
        return await self.store.record_many(items)

    async def slices(self, dimension: str = "tier", start: int = T0) -> dict[str, dict[str, float]]:
        version = self.suites.by_name["qa"].version
        key = self.store.keys.slice(self.store.pair_id("m1", "qa", version), dimension, SIZE, start)
        return slice_figures(await self.store.client.hgetall(key))


@pytest.fixture
def clock() -> list[float]:
    return [T0 + 2.0]


# -- the suite file and each event's values --------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "tags", "spec", "expected"),
    [
        ({"tier": "gold"}, [], "metadata.tier", "gold"),
        ({"service.name": "checkout"}, [], "metadata.service.name", "checkout"),  # OTLP's resource entry
        ({"user": {"tier": "gold"}}, [], "metadata.user.tier", "gold"),  # nested objects
        ({}, ["x", "tier:silver"], "tag:tier:", "silver"),
        ({"tier": 3}, [], "metadata.tier", INVALID),  # not a string
        ({"tier": ""}, [], "metadata.tier", INVALID),
        ({"tier": "x" * 129}, [], "metadata.tier", INVALID),
        ({"tier": "x" * 128}, [], "metadata.tier", "x" * 128),
        ({"tier": "(other)"}, [], "metadata.tier", INVALID),  # a reserved value is not the producer's to send
        ({}, [], "metadata.tier", MISSING),
        ({}, ["tier"], "tag:tier:", MISSING),
        ({"v": "v3", "loc": "fr"}, [], ["metadata.v", "metadata.loc"], "v3|fr"),
        ({"v": "v3"}, [], ["metadata.v", "metadata.loc"], MISSING),
        ({"v": 3}, [], ["metadata.v", "metadata.loc"], INVALID),
    ],
)
def test_an_events_value_in_a_dimension(
    metadata: dict[str, Any], tags: list[str], spec: str | list[str], expected: str
) -> None:
    dimension = spec if isinstance(spec, str) else {"fields": spec}
    _, suites = parse_config({"suites": [SUITE], "segments": {"dimensions": {"d": dimension}}})
    request = RequestEvent(id="e", model="m", output="o", metadata=metadata, tags=tags)
    [note] = SlicesAnnotator(suites.segments).annotate([(request, None, None)])  # type: ignore[list-item]
    assert note == (expected,)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"segments": {"dimensions": {"tier": "tier"}}}, "segments.dimensions.tier"),
        ({"segments": {"dimensions": {}}}, "segments.dimensions"),
        ({"segments": {"dimensions": {"t": "metadata.t"}, "max_values": 0}}, "segments.max_values"),
        (
            {
                "segments": {"dimensions": {"tier": "metadata.tier"}},
                "alerts": [
                    {
                        "name": "r",
                        "metric": "mean_score",
                        "comparator": "<",
                        "threshold": 0.5,
                        "window": 60,
                        "segments": ["region"],
                    }
                ],
            },
            "alerts[0].segments[0]",
        ),
    ],
)
def test_a_bad_segments_section_fails_with_its_path(data: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"suites": [SUITE], **data})
    assert any(issue.path.startswith(path) for issue in caught.value.issues), caught.value.issues


def test_nothing_is_built_without_segments() -> None:
    _, suites = parse_config({"suites": [SUITE]})
    assert not any(isinstance(r, SlicesRecorder) for r in record_plugins(enabled(Settings(), suites)))
    assert not any(a.key == SLICES for a in annotators(suites))


# -- recorded per slice -----------------------------------------------------------------------------------


async def test_each_window_is_kept_per_value_exactly_once(
    aredis: aioredis.Redis, prefix: str, clock: list[float]
) -> None:
    world = World(aredis, prefix, config(), clock)
    raws = [event(0, "gold"), event(1, "gold", output="Rome"), event(2, "free"), event(3, None), event(4, 7)]
    assert await world.record(*raws) == [None] * 5
    await world.record(*raws[:3])  # redelivered: counted before, not again
    await world.record(raws[4], event(5, "free"))  # partly redelivered
    found = await world.slices()
    assert {v: f["count"] for v, f in found.items()} == {"gold": 2, "free": 2, MISSING: 1, INVALID: 1}
    assert found["gold"]["passes"] == 1 and found["gold"]["sum"] == pytest.approx(1.0)
    assert found["free"]["sumsq"] == pytest.approx(2.0)
    # the pair's own figures are what they were: the slices are beside them
    pair = await world.store.window(SIZE, T0, "m1", "qa", world.suites.by_name["qa"].version)
    assert pair.count == 6


async def test_values_beyond_max_values_count_under_other(
    aredis: aioredis.Redis, prefix: str, clock: list[float]
) -> None:
    world = World(aredis, prefix, config(max_values=3), clock)
    await world.record(*(event(i, f"c{i % 5}") for i in range(10)))  # c0..c4, two events each
    await world.record(event(10, "c1"), event(11, "c9"), event(12, None))
    found = await world.slices()
    kept = {v for v in found if v not in (OTHER, MISSING)}
    assert len(kept) == 3  # first seen: the first three values the script met
    assert found[OTHER]["count"] == 13 - 1 - sum(found[v]["count"] for v in kept)
    assert found[MISSING]["count"] == 1  # takes no place among the three
    assert sum(f["count"] for f in found.values()) == 13


async def test_a_hundred_thousand_distinct_values_keep_redis_bounded(
    aredis: aioredis.Redis, prefix: str, clock: list[float]
) -> None:
    data = config()
    data["segments"]["dimensions"]["customer"] = "metadata.customer"
    world = World(aredis, prefix, data, clock)
    n, batch = 100_000, 2_000
    for first in range(0, n, batch):
        await world.record(
            *(
                event(i, "gold", metadata={"tier": "gold", "customer": f"cust-{i}"})
                for i in range(first, first + batch)
            )
        )
    customers = await world.slices("customer")
    assert len(customers) == 51  # 50 values and (other)
    assert sum(f["count"] for f in customers.values()) == n
    assert customers[OTHER]["count"] == n - 50
    keys = [k async for k in aredis.scan_iter(match=f"{prefix}*sg:*", count=1000)]
    assert len(keys) == 2  # one hash per dimension of the one window
    assert max([await aredis.memory_usage(k) or 0 for k in keys]) < 16_384


async def test_a_late_event_counts_in_the_open_windows_slices(
    aredis: aioredis.Redis, prefix: str, clock: list[float]
) -> None:
    world = World(aredis, prefix, config(), clock)
    await world.record(event(0, "gold"))
    clock[0] = T0 + 2 * SIZE + 5  # the first window is past the watermark now
    await world.record(event(1, "gold", at=T0 + 3))
    assert (await world.slices())["gold"]["count"] == 1
    assert (await world.slices(start=T0 + 2 * SIZE))["gold"]["count"] == 1
