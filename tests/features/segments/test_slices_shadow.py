"""Shadow versions keep slices (docs/segments.md, docs/versions.md) on real Redis: the worker's shadow
pipelines note each event's slice values, so a shadow version's windows have their slice figures, equal to
a recount of the shadow's published results by the events' metadata, and counted once on redelivery."""

from __future__ import annotations

import textwrap
from collections import defaultdict

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config_text
from streameval.features.setup import annotators, enabled, record_plugins
from streameval.models import GradedResult, format_time
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.runtime import shadow_pipelines
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.store_codec import slice_figures

SIZE = 60
T0 = 1_800_000_000  # a window boundary for 60 s windows
CONFIG = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}]
    shadow:
      - {label: soft, evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}], threshold: 0.5}
segments:
  dimensions:
    tier: metadata.tier
"""
EVENTS = [
    ("Paris", "free"),
    ("Pariss", "free"),
    ("Lyon", "free"),
    ("Paris!", "pro"),
    ("Rome", "pro"),
    ("P", None),
]


def batch() -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps(
                {
                    "id": f"s-{i}",
                    "model": "m",
                    "output": output,
                    "expected": "Paris",
                    "timestamp": format_time(T0 + 1 + i),
                    "metadata": {} if tier is None else {"tier": tier},
                }
            ),
            Source("evals.requests", 0, i),
        )
        for i, (output, tier) in enumerate(EVENTS)
    ]


async def test_a_shadow_versions_windows_have_slice_figures(aredis: aioredis.Redis, prefix: str) -> None:
    _, suites = parse_config_text(textwrap.dedent(CONFIG))
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        clock=lambda: T0 + 10,
        recorders=record_plugins(enabled(Settings(), suites)),
    )
    shadows = shadow_pipelines(suites, Settings(), aredis)
    proc = Processor(Pipeline(suites, annotators=annotators(suites)), store, shadows=shadows)
    messages = await proc.process_batch(batch())
    messages += await proc.process_batch(batch())  # redelivered: counted once
    shadow_version = suites.by_name["qa"].shadows[0].suite.version
    results = {
        r.id: r
        for m in messages
        if (r := GradedResult.model_validate_json(m.value)).suite_version == shadow_version
    }
    assert len(results) == len(EVENTS) and all(r.shadow for r in results.values())
    expected: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0.0, "sum": 0.0, "passes": 0.0})
    for event_id, result in results.items():
        tier = EVENTS[int(event_id.split("-")[1])][1] or "(missing)"
        expected[tier]["count"] += 1
        expected[tier]["sum"] += result.score
        expected[tier]["passes"] += result.passed
    key = store.keys.slice(store.pair_id("m", "qa", shadow_version), "tier", SIZE, T0)
    found = slice_figures(await aredis.hgetall(key))
    assert set(found) == {"free", "pro", "(missing)"}
    for tier, figures in expected.items():
        assert found[tier]["count"] == figures["count"]
        assert found[tier]["sum"] == pytest.approx(figures["sum"])
        assert found[tier]["passes"] == figures["passes"]
