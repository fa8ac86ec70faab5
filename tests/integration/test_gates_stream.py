"""Hard gates on the stream: the worker publishes the same gated verdict as the offline pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from _gates_helpers import CARD, CLEAN, suite

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import collect, produce

pytestmark = pytest.mark.integration


def test_a_failed_gate_fails_the_streamed_result(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(yaml.safe_dump(suite("letters")), encoding="utf-8")
    start_worker(config)
    events = [
        orjson.dumps({"id": f"g{i}", "model": "m", "output": text}) for i, text in enumerate([CARD, CLEAN])
    ]
    asyncio.run(produce(broker.bootstrap, topics["requests"], events))
    records = asyncio.run(
        collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 2, timeout=120)
    )
    results = {r["id"]: r for r in (orjson.loads(rec.value) for rec in records)}
    leaked, clean = results["g0"], results["g1"]
    assert leaked["score"] == pytest.approx(0.75) and leaked["passed"] is False and leaked["grade"] == "F"
    assert leaked["failed_gates"] == ["no_card"] and "gate 'no_card' failed" in leaked["reason"]
    assert (clean["passed"], clean["grade"], clean["failed_gates"]) == (True, "A+", [])
