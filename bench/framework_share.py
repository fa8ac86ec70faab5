"""The framework's share of ``streameval evaluate``'s CPU: evaluate against a bare loop doing the same checks.

    .venv/bin/python bench/framework_share.py [--events 2000] [--rounds 3] [--breakdown] [--callgrind N]

Two workloads, each measured side by side in one process (rounds alternate bare / evaluate):

* ``six``: 2,000 outputs of ~1.7 kB (a JSON answer) with an expected answer of the same length; the
  suite runs exact_match, contains, regex, json_schema, levenshtein similarity and a length regex.
* ``small``: 2,000 outputs of ~200 bytes; exact_match, contains and regex (the per-event cost).

"bare" is a plain loop over the same JSONL file doing the same checks with the same libraries, compiled
once (orjson, regex, jsonschema, rapidfuzz): parse the line, run the checks, combine the scores, write
one small JSON result per line. "evaluate" is :func:`streameval.offline.evaluate_file` (what
``streameval evaluate`` runs, without the CLI's start-up and summary table) on the same file. CPU is
process time (user + system) per output; each cell is the median of the rounds (fastest in brackets).

``--breakdown`` also prints the CPU of each step (decode, the checks alone, the per-evaluator wrapping,
the graded result, encoding), measured stage by stage on the same outputs.

``--processor rules,demo`` also measures the worker's batch step without Kafka (``Processor.process_batch``:
decode, evaluate, record in Redis, encode) against the raw evaluation of bench/throughput.py's (a') loop
(``process_sync`` + ``model_dump_json``), CPU per event, alternated; Redis at REDIS_URL, else
127.0.0.1:6379 (keys under a bench prefix, deleted). The ratio raw / worker is the part of
throughput.py's (b) / (a') that is not Kafka or Faust.

``--callgrind N`` also counts instructions (``valgrind --tool=callgrind``, which repeats exactly on a
shared box; ``perf stat -e instructions`` is not supported here): for each workload three child runs of
this script under callgrind, each doing the same set-up and a 50-event warm-up, then nothing, the bare
loop or evaluate on N outputs; instructions per output = (run - set-up only run) / N.
The start-up heap is frozen (``gc.freeze``) after the warm-up, as ``streameval evaluate`` freezes it
once configured; ``--no-freeze`` measures without (what main did before the fourth pass).

Nothing is asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import re as stdlib_re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import regex
from jsonschema import Draft202012Validator
from rapidfuzz.distance import Levenshtein

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _worker
_WORDS = (
    "the model answers that a river flows north through the valley and the city grows along "
    "its banks while farmers plant wheat in spring and harvest it late in the summer"
).split()

ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
}
STATES = r'"answer"\s*:'
LENGTH = r"^[\s\S]{1,2000}$"

SUITES: dict[str, dict[str, Any]] = {
    "six": {
        "suites": [
            {
                "name": "six",
                "default": True,
                "threshold": 0.5,
                "evaluators": [
                    {"evaluator": "exact_match"},
                    {"evaluator": "contains"},
                    {"evaluator": "regex", "params": {"pattern": STATES}},
                    {"evaluator": "json_schema", "params": {"schema": ANSWER_SCHEMA}},
                    {"evaluator": "similarity", "params": {"algorithm": "levenshtein"}},
                    {"evaluator": "regex", "name": "length", "params": {"pattern": LENGTH}},
                ],
            }
        ]
    },
    "small": {
        "suites": [
            {
                "name": "small",
                "default": True,
                "threshold": 0.5,
                "evaluators": [
                    {"evaluator": "exact_match"},
                    {"evaluator": "contains"},
                    {"evaluator": "regex", "params": {"pattern": r"answer\s*(is|:)", "flags": "i"}},
                ],
            }
        ]
    },
}


def events(workload: str, count: int, seed: int = 11) -> list[bytes]:
    """``count`` event lines of the workload (fixed seed: every run gets the same bytes)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if workload == "six":  # ~1.7 kB JSON answers, a reference sharing ~80 % of the words
            words = [rng.choice(_WORDS) for _ in range(300)]
            ref = [w if rng.random() < 0.8 else rng.choice(_WORDS) for w in words]
            output = orjson.dumps({"answer": " ".join(words), "confidence": 0.9}).decode()
            expected = orjson.dumps({"answer": " ".join(ref), "confidence": 0.9}).decode()
            if i % 10 == 0:
                expected = output  # some exact matches
        else:  # ~200-byte events
            words = [rng.choice(_WORDS) for _ in range(8)]
            output = "The answer is " + " ".join(words)
            expected = words[0] if i % 3 else "nowhere"
        event = {
            "id": f"out-{i}",
            "model": f"model-{i % 3}",
            "input": "Describe the valley.",
            "output": output,
            "expected": expected,
        }
        out.append(orjson.dumps(event))
    return out


# -- the bare loop ---------------------------------------------------------------------------------
def bare_six() -> Any:
    states, length = regex.compile(STATES), regex.compile(LENGTH)
    validator = Draft202012Validator(ANSWER_SCHEMA)

    def check(event: dict[str, Any]) -> list[float]:
        output, expected = event["output"], event["expected"]
        try:
            schema_ok = validator.is_valid(orjson.loads(output))
        except orjson.JSONDecodeError:
            schema_ok = False
        return [
            float(output == expected),
            float(expected in output),
            float(states.search(output) is not None),
            float(schema_ok),
            Levenshtein.normalized_similarity(output, expected),
            float(length.search(output) is not None),
        ]

    return check


def bare_small() -> Any:
    pattern = regex.compile(r"answer\s*(is|:)", regex.IGNORECASE)

    def check(event: dict[str, Any]) -> list[float]:
        output, expected = event["output"], event["expected"]
        return [
            float(output == expected),
            float(expected in output),
            float(pattern.search(output) is not None),
        ]

    return check


def run_bare(workload: str, src: Path, dst: Path) -> None:
    check = bare_six() if workload == "six" else bare_small()
    with src.open("rb") as lines, dst.open("wb") as out:
        for line in lines:
            event = orjson.loads(line)
            scores = check(event)
            score = sum(scores) / len(scores)
            out.write(
                orjson.dumps(
                    {
                        "id": event["id"],
                        "model": event["model"],
                        "score": score,
                        "passed": score >= 0.5,
                        "scores": scores,
                    }
                )
                + b"\n"
            )


# -- evaluate --------------------------------------------------------------------------------------
class Evaluate:
    def __init__(self, workload: str, workdir: Path) -> None:
        from streameval.config import parse_config_text

        self.text = orjson.dumps(SUITES[workload]).decode()  # JSON is YAML
        self.suites = parse_config_text(self.text, file="bench.json")[1]
        self.workdir = workdir

    def run(self, src: Path) -> None:
        from streameval.offline import evaluate_file
        from streameval.pipeline import Pipeline

        out, dead = self.workdir / "results.jsonl", self.workdir / "dead.jsonl"
        asyncio.run(evaluate_file(Pipeline(self.suites), src, out, dead))


def cpu_per_output(run: Any, count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1e6


def measure(
    workload: str, count: int, rounds: int, workdir: Path, *, freeze: bool = True
) -> tuple[list[float], list[float]]:
    src = workdir / f"{workload}.jsonl"
    src.write_bytes(b"".join(line + b"\n" for line in events(workload, count)))
    evaluate = Evaluate(workload, workdir)
    warm = workdir / "warm.jsonl"
    warm.write_bytes(b"".join(line + b"\n" for line in events(workload, 50)))
    run_bare(workload, warm, workdir / "bare.jsonl")
    evaluate.run(warm)
    if freeze:  # what `streameval evaluate` does once configured (streameval._util.frozen_heap)
        gc.collect()
        gc.freeze()
    bare, framework = [], []
    for _ in range(rounds):
        bare.append(cpu_per_output(lambda: run_bare(workload, src, workdir / "bare.jsonl"), count))
        framework.append(cpu_per_output(lambda: evaluate.run(src), count))
    return bare, framework


def breakdown(workload: str, count: int, rounds: int) -> dict[str, float]:
    """CPU µs per output of each step of ``Pipeline.process_sync`` and the writing, on ``count`` outputs
    (the fastest of ``rounds``): stages measured cumulatively, each row is the difference to the previous."""
    from streameval.grading import combine
    from streameval.pipeline import Pipeline, Source
    from streameval.summary import Summary

    lines = events(workload, count)
    pipeline = Pipeline(Evaluate(workload, Path(".")).suites)
    decoded = [pipeline.decode(raw) for raw in lines]
    suite = pipeline.suites.route(decoded[0])
    evaluators = [bound.evaluator for bound in suite.evaluators]
    gc.collect()
    gc.freeze()  # as measure() and `streameval evaluate`

    def checks() -> None:
        for event in decoded:
            for evaluator in evaluators:
                evaluator.evaluate(event)

    def rules() -> None:
        for event in decoded:
            pipeline._run_rules(event, suite, [], {}, None)

    def graded() -> None:
        for event in decoded:
            results: list[Any] = []
            pipeline._run_rules(event, suite, results, {}, None)
            pipeline._graded(event, suite, results, combine((r.score, r.weight) for r in results), None, 1.0)

    def decode() -> None:
        for raw in lines:
            pipeline.decode(raw)

    def process() -> None:
        for raw in lines:
            pipeline.process_sync(raw, Source(), 1.0)

    try:
        from streameval.models import encode_result
    except ImportError:  # code before the fourth pass (--before)
        encode_result = None

    def write() -> None:
        summary, seen = Summary(), {}
        for raw in lines:
            result = pipeline.process_sync(raw, Source(), 1.0).result  # type: ignore[union-attr]
            encoded = encode_result(result) if encode_result else result.model_dump_json().encode()
            seen[result.id] = encoded
            summary.add(result)

    stages = {
        "checks": checks,
        "rules": rules,
        "graded": graded,
        "decode": decode,
        "process": process,
        "write": write,
    }
    best = {name: min(cpu_per_output(run, count) for _ in range(rounds)) for name, run in stages.items()}
    return {
        "the checks (evaluators' evaluate)": best["checks"],
        "per-evaluator wrapping (results, latencies)": best["rules"] - best["checks"],
        "graded result (combine, gates, times, model)": best["graded"] - best["rules"],
        "decode (size, depth, pydantic, strict JSON)": best["decode"],
        "process_sync beyond decode + evaluate (route, outcome; fresh events)": best["process"]
        - best["graded"]
        - best["decode"],
        "encode the result (encode_result), summary": best["write"] - best["process"],
        "Pipeline.process_sync + encode, total": best["write"],
    }


async def processor_share(workload: str, count: int, rounds: int) -> tuple[list[float], list[float]]:
    """CPU µs per event of the worker's batch step without Kafka (``Processor.process_batch``: decode,
    evaluate, record in Redis, encode; batches of 256, ``emit`` as the worker passes it) and of the raw
    evaluation (``process_sync`` + the result's encoding, what bench/throughput.py's (a') loop does per
    event), alternated. ``rules``: bench/_worker.py's rule suite; ``demo``: examples/suites.yaml."""
    import uuid

    import redis.asyncio as aioredis
    from _worker import RULE_SUITE, demo_events, outcome_encoder, rule_events

    from streameval.config import parse_config_text
    from streameval.pipeline import Pipeline, Source
    from streameval.processor import Processor, Publish
    from streameval.store import ResultStore

    if workload == "rules":
        text, lines = orjson.dumps(RULE_SUITE).decode(), rule_events(count)
    else:
        text, lines = (ROOT / "examples" / "suites.yaml").read_text("utf-8"), demo_events(count)
    suites = parse_config_text(text, file="bench")[1]
    client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"streameval-bench-share:{uuid.uuid4().hex[:8]}:"
    processor = Processor(Pipeline(suites), ResultStore(client, prefix=prefix, windows=(60,)))
    raw_pipeline = Pipeline(suites)
    encode_outcome = outcome_encoder()
    await processor.start()

    async def emit(messages: list[Publish]) -> None:
        return None

    async def worker_step() -> float:
        tag = uuid.uuid4().hex[:6].encode()
        fresh = [raw.replace(b'"id":"', b'"id":"' + tag, 1) for raw in lines]
        started = time.process_time()
        for j in range(0, len(fresh), 256):
            batch = [(raw, Source("bench", 0, j + i)) for i, raw in enumerate(fresh[j : j + 256])]
            await processor.process_batch(batch, emit=emit)
        return (time.process_time() - started) / len(fresh) * 1e6

    def raw_step() -> float:
        started = time.process_time()
        for raw in lines:
            encode_outcome(raw_pipeline.process_sync(raw, Source(), time.time()))
        return (time.process_time() - started) / len(lines) * 1e6

    worker, raw = [], []
    try:
        await worker_step()
        raw_step()
        for _ in range(rounds):
            worker.append(await worker_step())
            raw.append(raw_step())
    finally:
        await processor.close()
        async for key in client.scan_iter(match=f"{prefix}*", count=1000):
            await client.delete(key)
        await client.aclose()
    return worker, raw


def child(workload: str, mode: str, count: int) -> None:
    """One callgrind run: set-up and warm-up, then ``mode`` (none, bare, evaluate) on ``count`` outputs."""
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        workdir = Path(tmp)
        src, warm = workdir / "in.jsonl", workdir / "warm.jsonl"
        src.write_bytes(b"".join(line + b"\n" for line in events(workload, count)))
        warm.write_bytes(b"".join(line + b"\n" for line in events(workload, 50, seed=3)))
        evaluate = Evaluate(workload, workdir)
        run_bare(workload, warm, workdir / "bare.jsonl")
        evaluate.run(warm)
        if mode == "bare":
            run_bare(workload, src, workdir / "bare.jsonl")
        elif mode == "evaluate":
            evaluate.run(src)


_COLLECTED = stdlib_re.compile(rb"Collected : (\d+)")


def instructions(workload: str, mode: str, count: int) -> int:
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            workload,
            mode,
            str(count),
        ],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict layouts each run
    )
    found = _COLLECTED.search(proc.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {proc.stderr[-500:]!r}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", choices=["six", "small", "both"], default="both")
    parser.add_argument(
        "--callgrind", type=int, default=0, metavar="N", help="also count instructions on N outputs"
    )
    parser.add_argument("--breakdown", action="store_true", help="also the CPU of each step of the pipeline")
    parser.add_argument(
        "--processor",
        default="",
        metavar="rules,demo",
        help="also the worker's batch step against the raw evaluation (needs Redis: REDIS_URL)",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the start-up heap to the collector (main before the fourth pass: no gc.freeze)",
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    workloads = ["six", "small"] if args.workload == "both" else [args.workload]
    print(f"{args.events} outputs x {args.rounds} rounds; CPU µs per output: median (fastest)")
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        for workload in workloads:
            bare, framework = measure(
                workload, args.events, args.rounds, Path(tmp), freeze=not args.no_freeze
            )
            ratio = statistics.median(framework) / statistics.median(bare)
            print(
                f"{workload:6} bare {statistics.median(bare):7.1f} ({min(bare):.1f})   evaluate "
                f"{statistics.median(framework):7.1f} ({min(framework):.1f})   ratio {ratio:.3f} "
                f"(fastest {min(framework) / min(bare):.3f})",
                flush=True,
            )
    for workload in workloads if args.breakdown else []:
        print(
            f"{workload}: where the CPU goes, µs per output (fastest of {args.rounds} rounds, {args.events} outputs)"
        )
        for name, us in breakdown(workload, args.events, args.rounds).items():
            print(f"  {name:70} {us:7.1f}")
    for workload in args.processor.split(",") if args.processor else []:
        worker, raw = asyncio.run(processor_share(workload, args.events, args.rounds))
        print(
            f"{workload:6} worker batch step (Processor.process_batch, Redis, no Kafka) {statistics.median(worker):7.1f} "
            f"({min(worker):.1f})   raw evaluation {statistics.median(raw):7.1f} ({min(raw):.1f})   raw / worker "
            f"{statistics.median(raw) / statistics.median(worker):.3f}",
            flush=True,
        )
    for workload in workloads if args.callgrind else []:
        base = instructions(workload, "none", args.callgrind)
        bare_i = (instructions(workload, "bare", args.callgrind) - base) / args.callgrind
        eval_i = (instructions(workload, "evaluate", args.callgrind) - base) / args.callgrind
        print(
            f"{workload:6} instructions per output (callgrind, {args.callgrind} outputs): bare {bare_i:,.0f}   "
            f"evaluate {eval_i:,.0f}   ratio {eval_i / bare_i:.3f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
