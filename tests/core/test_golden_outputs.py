"""The same configuration gives the same bytes: results, dead letters, aggregates, alerts, session results and
review items of the example events, compared with golden files written by an earlier version of the code.

The golden files (tests/data/golden/) were made before the engine's features became plug-ins; every later
change to how features are wired must leave these outputs byte-identical. Clocks are injected (the
pipeline's, the store's, the closers'), so nothing depends on when the test runs. To write them anew
(only for a deliberate change of an output), run this file as a script:
``PYTHONPATH=tests .venv/bin/python tests/core/test_golden_outputs.py --write``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis
from _support import wait_until

from streameval.config import load_config
from streameval.offline import evaluate_file
from streameval.outputs import Publish
from streameval.pipeline import Pipeline, Source
from streameval.runtime import Runtime, load_worker_config
from streameval.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden"
EVENTS = ROOT / "examples" / "events.jsonl"
T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z: every event's reception time (none of them has a timestamp)

#: the bundled suites plus what produces every other output: alert rules (with drill-down examples),
#: the review queue and sessions (one per model)
EXTRA = """
windowing: {allowed_lateness_s: 1, lease_s: 30}
alerts:
  - {name: mean-low, metric: mean_score, comparator: "<", threshold: 0.9, window: 60, min_count: 1}
  - {name: pass-low, metric: pass_rate, comparator: "<", threshold: 0.95, window: 3600, min_count: 2}
review: {rate_per_min: 1000, control_rate: 0.5}
sessions:
  - name: per_model
    key: model
    gap_s: 5
    evaluators: [{evaluator: turn_scores}]
"""


def _lines(messages: list[Publish], kind: str) -> bytes:
    """One kind's messages, key and value a line each, in a stable order (closers publish concurrently)."""
    rows = sorted((m.key or b"", m.value) for m in messages if m.kind == kind)
    return b"".join(key + b"\t" + value + b"\n" for key, value in rows)


async def _offline(tmp: Path) -> dict[str, bytes]:
    _, suites = load_config(str(ROOT / "examples" / "suites.yaml"))
    pipeline = Pipeline(suites, clock=lambda: T0)
    out, dead = tmp / "results.jsonl", tmp / "deadletters.jsonl"
    await evaluate_file(pipeline, EVENTS, out, dead, concurrency=1)
    return {"offline_results.jsonl": out.read_bytes(), "offline_deadletters.jsonl": dead.read_bytes()}


async def _stream(tmp: Path, redis_url: str, prefix: str) -> dict[str, bytes]:
    config = tmp / "suites.yaml"
    config.write_text(
        (ROOT / "examples" / "suites.yaml").read_text(encoding="utf-8") + EXTRA, encoding="utf-8"
    )
    settings = Settings(config=str(config), redis_url=redis_url, redis_prefix=prefix, windows=(60, 3600))
    runtime = await Runtime.build(load_worker_config(settings))
    try:
        processor = runtime.processor
        processor.pipeline.clock = lambda: T0
        processor.store.clock = lambda: T0

        async def later() -> float:  # both windows of T0 have ended and their lateness passed
            return T0 + 7200

        runtime.closer._clock = later
        assert runtime.sessions is not None
        runtime.sessions._clock = lambda: T0 + 60
        raws = [line for line in EVENTS.read_bytes().splitlines() if line.strip()]
        sent: list[Publish] = []
        for first in range(0, len(raws), 64):
            chunk = raws[first : first + 64]
            sent += await processor.process_batch(
                [(raw, Source("in", 0, first + i)) for i, raw in enumerate(chunk)]
            )

        async def send(message: Publish) -> None:
            sent.append(message)

        while await runtime.close_windows(send):
            pass
        models = {orjson.loads(m.value)["model"] for m in sent if m.kind == "result"}
        sessions = runtime.sessions

        async def all_closed() -> bool:  # due once the settle time (the lateness, 1 s) passed on Redis' clock
            await sessions.run_once(send)
            return sum(m.kind == "session" for m in sent) >= len(models)

        await wait_until(all_closed, timeout=30, what="a session result per model")
    finally:
        await runtime.close()
    kinds = {"result", "deadletter", "aggregate", "alert", "session", "review"}
    assert {m.kind for m in sent} <= kinds, {m.kind for m in sent}
    out = {f"stream_{kind}.txt": _lines(sent, kind) for kind in sorted(kinds)}
    # a session's closed_at is the Redis clock at its claim (the scripts read TIME): the one clock not injected
    out["stream_session.txt"] = re.sub(
        rb'"closed_at":"[^"]*"', b'"closed_at":"(Redis clock)"', out["stream_session.txt"]
    )
    return out


async def produce(tmp: Path, redis_url: str, prefix: str) -> dict[str, bytes]:
    """Every golden output of this checkout, by file name."""
    return {**await _offline(tmp), **await _stream(tmp, redis_url, prefix)}


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the golden files were made on Python 3.11; from 3.12 sum() of floats is compensated "
    "(Neumaier), which moves the last digit of some scores: byte identity holds per interpreter",
)
async def test_outputs_are_byte_identical_to_the_golden_files(
    tmp_path: Path, redis_url: str, prefix: str, aredis: aioredis.Redis
) -> None:
    got = await produce(tmp_path, redis_url, prefix)
    expected = {path.name: path.read_bytes() for path in sorted(GOLDEN.iterdir())}
    assert sorted(got) == sorted(expected)
    for name in ("stream_result.txt", "stream_aggregate.txt", "stream_alert.txt"):  # the test tests something
        assert got[name].count(b"\n") > 3, name
    assert got["stream_session.txt"] and got["stream_review.txt"]
    for name, data in got.items():
        assert data == expected[name], f"{name} differs from tests/data/golden/{name}"


def _write() -> None:  # pragma: no cover - run by hand
    import shutil
    import tempfile

    import redis

    url = "redis://127.0.0.1:6379/0"
    prefix = f"golden-{uuid.uuid4().hex[:8]}:"
    tmp = Path(tempfile.mkdtemp())
    try:
        outputs = asyncio.run(produce(tmp, url, prefix))
    finally:
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"*{prefix}*", count=10_000):
            client.delete(key)
        shutil.rmtree(tmp)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, data in outputs.items():
        (GOLDEN / name).write_bytes(data)
        print(name, len(data), "bytes,", data.count(b"\n"), "lines")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        _write()
