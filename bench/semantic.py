"""Cost of ``semantic_similarity``: outputs per second per core at 32, 128 and 256 tokens, the ratio
against the levenshtein ``similarity`` preset on the same events, model load time and RSS added.

    .venv/bin/python bench/semantic.py             # ~1 minute; needs the semantic extra (docs/drift.md)
    .venv/bin/python bench/semantic.py --batch 64

One core: BLAS is held to one thread (set before numpy loads), and every rate is per CPU second of this
process (``time.process_time``), with the wall time beside it. Each event has an output and an expected
answer of the given length in model tokens (real English sentences from tests/data, cut to length);
events go through the pipeline's batch step, as in an evaluation process: one embedding pass per batch.
Last, one batch (``--loop-batch`` events of 128 tokens) through the worker's own batch step
(``streameval.batch.evaluate_batch``, no evaluation processes): the longest the event loop went without a
turn, against the time of the same batch in one call.
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

import orjson  # noqa: E402
import yaml  # noqa: E402

from streameval.batch import SLICE_S, evaluate_batch  # noqa: E402
from streameval.config import parse_config_text  # noqa: E402
from streameval.pipeline import Pipeline, Source  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _rss_kb() -> dict[str, int]:
    """This process's resident memory by kind (kB): anonymous (its own) and file-backed (the mapped weights,
    shared with every other process that maps the same file)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0])
    return out


def _sentences() -> list[str]:
    pairs = [json.loads(line) for line in (ROOT / "tests/data/paraphrase_pairs.jsonl").open(encoding="utf-8")]
    real = json.loads((ROOT / "tests/data/metrics_real_text.json").read_text())["en"]
    return [p["a"] for p in pairs if p["lang"] == "en"] + list(real)


def _text(rng: random.Random, sentences: list[str], tokens: int, count_tokens: object) -> str:
    """Real sentences joined until the text has ``tokens`` model tokens ([CLS] and [SEP] included), cut there."""
    words: list[str] = []
    while True:
        words += rng.choice(sentences).split()
        if count_tokens(" ".join(words)) >= tokens:  # type: ignore[operator]
            break
    while count_tokens(" ".join(words[:-1])) >= tokens:  # type: ignore[operator]
        words.pop()
    return " ".join(words)


def _suite(evaluator: str) -> Pipeline:
    text = yaml.safe_dump(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": evaluator}]}]}
    )
    return Pipeline(parse_config_text(text)[1])


def _rate(
    pipeline: Pipeline, batches: list[list[tuple[bytes, Source]]], min_cpu_s: float
) -> tuple[float, float]:
    """(events per CPU second, events per wall second) over whole passes of ``batches``, at least ``min_cpu_s``."""
    events = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.process_time() - cpu0 < min_cpu_s:
        for batch in batches:
            outcomes = pipeline.process_sync_batch(batch, 0.0)
            assert all(o is not None and o.result is not None for o in outcomes)
            events += len(batch)
    return events / (time.process_time() - cpu0), events / (time.perf_counter() - wall0)


async def _loop_hold(pipeline: Pipeline, batch: list[tuple[bytes, Source]]) -> tuple[float, float]:
    """(the longest the loop went without a turn, CPU s) while :func:`evaluate_batch` evaluates ``batch``."""
    longest, last = 0.0, time.perf_counter()

    async def ticker() -> None:
        nonlocal longest, last
        while True:
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    cpu0 = time.process_time()
    await evaluate_batch(pipeline, batch)
    cpu = time.process_time() - cpu0
    ticking.cancel()
    return longest, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="events per batch (the worker's batch)")
    parser.add_argument("--cpu-s", type=float, default=4.0, help="CPU seconds measured per row")
    parser.add_argument(
        "--loop-batch", type=int, default=64, help="events of the batch run through the worker's batch step"
    )
    args = parser.parse_args()

    before = _rss_kb()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    semantic = _suite("semantic_similarity")
    encoder = semantic.suites.by_name["s"].evaluators[0].evaluator.encoder  # type: ignore[attr-defined]
    load_wall, load_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    loaded = _rss_kb()
    wall0 = time.perf_counter()
    encoder.encode(["warm up: the first pass reads the weights' pages"])
    first_wall = time.perf_counter() - wall0
    levenshtein = _suite("similarity")

    rng = random.Random(7)
    sentences = _sentences()
    print(
        f"model load: {load_wall * 1000:.0f} ms wall, {load_cpu * 1000:.0f} ms CPU "
        f"(config parse + tokenizer + memory-mapped weights); first pass {first_wall * 1000:.0f} ms"
    )
    print(f"{'tokens':>6} {'semantic/s/core':>16} {'wall/s':>8} {'levenshtein/s/core':>19} {'ratio':>7}")
    peak = loaded
    for tokens in (32, 128, 256):
        batches = []
        for b in range(4):
            batch = []
            for i in range(args.batch):
                output = _text(rng, sentences, tokens, lambda t: len(encoder.tokens(t)))
                expected = _text(rng, sentences, tokens, lambda t: len(encoder.tokens(t)))
                doc = {
                    "id": f"{tokens}-{b}-{i}",
                    "model": "m",
                    "input": "q",
                    "output": output,
                    "expected": expected,
                }
                batch.append((orjson.dumps(doc), Source()))
            batches.append(batch)
        sem_cpu, sem_wall = _rate(semantic, batches, args.cpu_s)
        lev_cpu, _ = _rate(levenshtein, batches, min(1.0, args.cpu_s))
        peak = max(peak, _rss_kb(), key=lambda r: r["VmRSS"])
        print(f"{tokens:>6} {sem_cpu:>16.1f} {sem_wall:>8.1f} {lev_cpu:>19.0f} {lev_cpu / sem_cpu:>6.0f}x")
    # the worker's batch step (no evaluation processes): how long the event loop is held at a time
    batch = [
        (
            orjson.dumps(
                {
                    "id": f"loop-{i}",
                    "model": "m",
                    "output": _text(rng, sentences, 128, lambda t: len(encoder.tokens(t))),
                    "expected": _text(rng, sentences, 128, lambda t: len(encoder.tokens(t))),
                }
            ),
            Source(),
        )
        for i in range(args.loop_batch)
    ]
    held, cpu = asyncio.run(_loop_hold(semantic, batch))
    wall0 = time.perf_counter()
    semantic.process_sync_batch(batch, 0.0)
    whole = time.perf_counter() - wall0
    print(
        f"worker's batch step, {len(batch)} events of 128 tokens: the event loop held at most {held * 1000:.0f} ms "
        f"at a time (slices of ~{SLICE_S * 1000:.0f} ms), against {whole * 1000:.0f} ms for the batch in one call; "
        f"{len(batch) / cpu:.1f} events / CPU s"
    )
    print(
        f"RSS: {before['VmRSS'] / 1024:.0f} MB before the model; +{(loaded['VmRSS'] - before['VmRSS']) / 1024:.0f} MB "
        f"after loading; peak +{(peak['VmRSS'] - before['VmRSS']) / 1024:.0f} MB "
        f"(of which file-backed, shared between processes: {(peak['RssFile'] - before['RssFile']) / 1024:.0f} MB; "
        f"anonymous: {(peak['RssAnon'] - before['RssAnon']) / 1024:.0f} MB), batches of {args.batch}"
    )


if __name__ == "__main__":
    main()
