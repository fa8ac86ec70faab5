"""What the human-label join costs: the verdicts kept in the record pipeline, and joining labels.

    python bench/label_join.py [--events 20000] [--batch 256] [--labels 5000] [--label-batch 100] [--buckets 256]

Two fresh ``redis-server`` processes (free loopback ports, no persistence; bench/redis_cost.py starts
them): the same synthetic judged results (3 judges, the panel and one rule evaluator, one model × suite,
windows 60 and 3600 s) are recorded in batches as the worker does (``ResultStore.record_many``), once
with the verdicts kept for the join (a ``VerdictRecorder``: on when labels are configured) and once without (the
baseline, same run). Then labels of random recorded events are joined in batches (``LabelStore.join``).
Printed, from ``INFO`` before and after each phase:

* Redis CPU µs per event recorded (``used_cpu_sys + used_cpu_user``), with and without, and the ratio;
* commands per event, with and without (``INFO commandstats``);
* worker CPU µs per event spent recording (``time.process_time``), with and without;
* bytes kept per event for the join (``MEMORY USAGE`` over every bucket key, after recording);
* per label joined: Redis calls (script calls and commands the join sends) and Redis CPU µs.

``--buckets`` is ``STREAMEVAL_LABEL_JOIN_BUCKETS`` (default here 256, so that 20 k events fill the buckets
as ~5 M events a week fill the default 16,384 buckets... at about the same verdicts per bucket). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _results(n: int, seed: int = 1) -> list[Any]:
    from streameval.models import EvaluatorResult, GradedResult, JudgeBlock, JudgeVerdict, format_time

    rng = random.Random(seed)
    now = time.time()
    out = []
    for i in range(n):
        scores = {j: float(rng.randrange(0, 11)) for j in ("alpha", "beta", "gamma")}
        verdicts = [
            JudgeVerdict(
                name=j, model=f"m-{j}", weight=1 / 3, status="ok", prompt="standard", scale="0-10", score=s
            )
            for j, s in scores.items()
        ]
        panel = sum(scores.values()) / 3
        rule = rng.random()
        score = (panel / 10 + rule) / 2
        out.append(
            GradedResult(
                id=f"ev-{seed}-{i}",
                model="m",
                suite="qa",
                score=score,
                passed=score >= 0.6,
                threshold=0.6,
                grade="x",
                evaluators=[
                    EvaluatorResult(name="exact_match", score=rule, passed=rule >= 0.6, weight=1.0),
                    EvaluatorResult(name="judge_panel", score=panel / 10, passed=panel >= 6, weight=1.0),
                ],
                event_time=format_time(now),
                evaluated_at=format_time(now),
                latency_ms=5.0,
                pipeline_version="bench",
                judge=JudgeBlock(
                    status="ok",
                    mode="blend",
                    prompt="rubric",
                    category=None,
                    panel_score=panel,
                    metrics_score=panel,
                    final_score=panel,
                    reason="",
                    judges=verdicts,
                    fallbacks=[],
                ),
            )
        )
    return out


def _info(client: Any) -> dict[str, float]:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    return {
        "cpu": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "calls": float(sum(v["calls"] for v in stats.values())),
    }


async def _side(port: int, results: list[Any], args: argparse.Namespace, keep: bool) -> dict[str, float]:
    import redis
    import redis.asyncio as aioredis

    from streameval.features.labels import Label, LabelStore, VerdictRecorder
    from streameval.keyspace import Keys
    from streameval.models import Feedback
    from streameval.store import ResultStore

    sync = redis.Redis(port=port)
    client = aioredis.Redis(port=port)
    labels = LabelStore(client, Keys("bench:"), buckets=args.buckets, windows=(60, 3600))
    recorders = [VerdictRecorder(labels)] if keep else []
    store = ResultStore(client, prefix="bench:", windows=(60, 3600), recorders=recorders)
    items = [(r, r.model_dump_json().encode(), None) for r in results]
    before, cpu0 = _info(sync), time.process_time()
    for k in range(0, len(items), args.batch):
        await store.record_many(items[k : k + args.batch])
    cpu1, after = time.process_time(), _info(sync)
    n = len(items)
    out = {
        "redis_us": (after["cpu"] - before["cpu"]) * 1e6 / n,
        "commands": (after["calls"] - before["calls"]) / n,
        "worker_us": (cpu1 - cpu0) * 1e6 / n,
    }
    if keep:
        generation = int(store.now() // labels.join_ttl_s)
        used = 0
        for bucket in range(args.buckets):
            used += sync.memory_usage(labels.bucket_key(bucket, generation), samples=0) or 0
        out["bytes_per_event"] = used / n
        rng = random.Random(9)
        chosen = [rng.choice(results) for _ in range(args.labels)]
        batch = [
            Label(Feedback(id=r.id, passed=rng.random() < 0.5, annotator=f"a{rng.randrange(3)}"), b"{}")
            for r in chosen
        ]
        before = _info(sync)
        calls = joined = 0
        for k in range(0, len(batch), args.label_batch):
            report = await labels.join(batch[k : k + args.label_batch])
            calls += report.calls
            joined += report.joined
        after = _info(sync)
        out["labels_joined"] = joined
        out["calls_per_label"] = calls / len(batch)
        out["label_redis_us"] = (after["cpu"] - before["cpu"]) * 1e6 / len(batch)
        out["label_commands"] = (after["calls"] - before["calls"]) / len(batch)
    await client.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--labels", type=int, default=5_000)
    parser.add_argument("--label-batch", type=int, default=100)
    parser.add_argument("--buckets", type=int, default=256)
    args = parser.parse_args()
    from redis_cost import _start_node

    results = _results(args.events)
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for keep in (False, True):
            port, proc = _start_node(tmp)
            try:
                figures[keep] = asyncio.run(_side(port, results, args, keep))
            finally:
                proc.terminate()
                proc.wait()
    off, on = figures[False], figures[True]
    print(f"{args.events} judged events in batches of {args.batch}; {args.buckets} buckets")
    print(
        f"  Redis CPU per event: {off['redis_us']:.2f} µs without the verdicts, {on['redis_us']:.2f} µs with "
        f"(x{on['redis_us'] / off['redis_us']:.2f})"
    )
    print(f"  commands per event: {off['commands']:.2f} without, {on['commands']:.2f} with")
    print(
        f"  worker CPU per event recording: {off['worker_us']:.1f} µs without, {on['worker_us']:.1f} µs with "
        f"(x{on['worker_us'] / off['worker_us']:.2f})"
    )
    print(
        f"  bytes kept per event for the join: {on['bytes_per_event']:.1f} B (MEMORY USAGE of the bucket keys)"
    )
    print(f"{args.labels} labels joined in batches of {args.label_batch}: {on['labels_joined']} joined")
    print(
        f"  Redis calls per label: {on['calls_per_label']:.3f} (commands inside Redis: {on['label_commands']:.2f}); "
        f"Redis CPU per label: {on['label_redis_us']:.2f} µs"
    )


if __name__ == "__main__":
    main()
