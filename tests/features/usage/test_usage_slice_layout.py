"""Usage per slice value in its fixed layout of doubles (streameval.usage_figures.pack_slice_usage): what the
record script adds place by place over several calls equals a recount of the events, on real Redis."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.features.setup import annotators, enabled, record_plugins
from streameval.features.usage._notes import FINISH_REASONS, OTHER
from streameval.models import format_time
from streameval.pipeline import Pipeline
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.store_codec import slice_figures
from streameval.usage_figures import (
    COARSE,
    SLICE_REASONS,
    SLICE_USAGE_TAG,
    bucket,
    pack_slice_usage,
    unpack_slice_usage,
)

SIZE, T0 = 10, 1_800_000_000
CONFIG: dict[str, Any] = {
    "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
    "segments": {"dimensions": {"tier": "metadata.tier"}, "max_values": 2},
    "prices": {"currency": "EUR", "models": {"m1": {"input": 1.0, "output": 4.0, "cached_input": 0.5}}},
}
# per record call: tier, input, output, cached input, duration ms, time to first token ms, finish reason
CALLS: list[list[tuple[str, int, int, int, float, float | None, str | None]]] = [
    [("gold", 1000, 500, 100, 120.0, None, "stop"), ("free", 10, 5, 0, 0.4, 0.2, "length")],
    [("gold", 2000, 250, 0, 45_000.0, 900.0, "made_up"), ("plus", 7, 3, 0, 3.0, None, None)],
    [("gold", 5, 1, 0, 2.5, 1.5, "tool_calls"), ("free", 300, 40, 30, 800.0, 80.0, "stop")],
    # within the ranges the values hold already: added in place
    [("gold", 50, 5, 0, 1000.0, 2.0, "stop"), ("free", 1, 1, 0, 100.0, None, "length")],
    [("other-1", 1, 1, 0, 10.0, None, "stop"), ("other-2", 2, 2, 0, 7_000.0, 5.0, "length")],
]


def expected(rows: list[tuple[str, int, int, int, float, float | None, str | None]]) -> dict[str, float]:
    """The usage figures of ``rows``, counted by hand (cost: (in - cached) × 1 + cached × 0.5 + out × 4)."""
    out: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        if value:
            out[name] = out.get(name, 0.0) + value

    for _, tokens_in, tokens_out, cached, duration, first, reason in rows:
        add("use:n", 1)
        add("use:in", tokens_in)
        add("use:out", tokens_out)
        add("use:cin", cached)
        add("use:c", ((tokens_in - cached) * 1.0 + cached * 0.5 + tokens_out * 4.0) / 1e6)
        add("use:p:EUR", 1)
        add(f"use:D{bucket(duration, COARSE)}", 1)
        if first is not None:
            add(f"use:T{bucket(first, COARSE)}", 1)
        if reason is not None:
            add(f"use:f:{reason if reason in FINISH_REASONS else OTHER}", 1)
    return out


async def test_usage_per_slice_over_several_calls_equals_a_recount(
    aredis: aioredis.Redis, prefix: str
) -> None:
    _, suites = parse_config(CONFIG)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=3.0,
        clock=lambda: T0 + 2,
        recorders=record_plugins(enabled(Settings(), suites)),
    )
    n = 0
    for rows in CALLS:
        batch = []
        for tier, tokens_in, tokens_out, cached, duration, first, reason in rows:
            usage: dict[str, Any] = {
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "cached_input_tokens": cached,
                "duration_ms": duration,
            }
            if first is not None:
                usage["time_to_first_token_ms"] = first
            if reason is not None:
                usage["finish_reason"] = reason
            raw = orjson.dumps(
                {
                    "id": f"e{n}",
                    "model": "m1",
                    "output": "x",
                    "timestamp": format_time(T0 + 1),
                    "metadata": {"tier": tier},
                    "usage": usage,
                }
            )
            n += 1
            outcome = await pipeline.process(raw)
            assert outcome.result is not None
            batch.append(
                (outcome.result, outcome.result.model_dump_json().encode(), None, raw, outcome.annotations)
            )
        await store.record_many(batch)
    key = store.keys.slice(store.pair_id("m1", "qa", suites.by_name["qa"].version), "tier", SIZE, T0)
    raw_hash = await aredis.hgetall(key)
    assert all(value[32:33] == SLICE_USAGE_TAG for value in raw_hash.values())  # the fixed layout, not a map
    found = slice_figures(raw_hash)
    everything = [row for rows in CALLS for row in rows]
    for value in ("gold", "free"):  # the first two values seen (max_values: 2); the rest under (other)
        rows = [row for row in everything if row[0] == value]
        want = expected(rows)
        got = {k: v for k, v in found[value].items() if k.startswith("use:")}
        assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k]) for k in want)
        assert found[value]["count"] == len(rows)
    rest = expected([row for row in everything if row[0] not in ("gold", "free")])
    got = {k: v for k, v in found["(other)"].items() if k.startswith("use:")}
    assert got.keys() == rest.keys() and all(got[k] == pytest.approx(rest[k]) for k in rest)


def test_the_layout_reads_back_what_it_packs() -> None:
    fields = {
        "use:n": 4.0,
        "use:in": 1234.0,
        "use:out": 56.0,
        "use:rt": 7.0,
        "use:c": 0.125,
        "use:p:USD": 3.0,
        "use:f:stop": 2.0,
        "use:f:(other)": 1.0,
        "use:D0": 1.0,
        "use:D35": 3.0,
        "use:T12": 2.0,
    }
    packed = pack_slice_usage(fields)
    assert packed[:1] == SLICE_USAGE_TAG
    assert unpack_slice_usage(packed) == fields
    assert unpack_slice_usage(pack_slice_usage({"use:n": 1.0})) == {"use:n": 1.0}  # no cost, no buckets
    with pytest.raises(ValueError, match="slice's usage"):
        unpack_slice_usage(b"\x81\xa1x\x01")


def test_the_layouts_finish_reasons_are_the_annotators() -> None:
    assert set(SLICE_REASONS) == FINISH_REASONS | {OTHER} and SLICE_REASONS[-1] == OTHER
