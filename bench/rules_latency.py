"""How long rule results wait when judges are slow: a mixed stream, this checkout against a baseline ref.

    python bench/rules_latency.py [--events 3000] [--rate 300] [--judged-share 0.1] [--judge-ms 2000]
                                  [--baseline REF] [--no-baseline]

One worker (once it answered 50 warm-up events) reads a stream produced at a steady ``--rate`` events/s: ``--judged-share`` of the events
belong to a suite with a one-judge panel (the simulated judge, answering after ``--judge-ms``), the
others to a rule-only suite (exact_match, token_f1). The judged events are spread evenly, so nearly
every batch mixes both kinds. Per event, the delay is its result's arrival on the results topic minus
the time it was sent (one wall clock). Printed for the rule results and the judged ones: median, p90,
p99 and max; and the worker's CPU per event. The baseline (default: where this branch left main) is
``git archive REF stream agents`` unpacked as a ``streameval`` package tree and put first on the
worker's PYTHONPATH; both run in the same invocation, baseline first. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from _worker import ROOT, pick_redis, run_workers, step, topic_names, write_config

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import start_judge_sim
from streameval.kafka_io import Record, ensure_topics, produce


def _config(url: str) -> Path:
    return write_config(
        {
            "judges": [
                {
                    "name": "sim-slow",
                    "protocol": "openai",
                    "base_url": f"{url}/v1",
                    "model": "simulated-slow",
                    "weight": 1,
                    "timeout_s": 120,
                    "max_concurrency": 256,
                }
            ],
            "suites": [
                {
                    "name": "rules",
                    "default": True,
                    "evaluators": [{"evaluator": "exact_match"}, {"evaluator": "token_f1"}],
                },
                {
                    "name": "judged",
                    "match": {"category": ["judged_qa"]},
                    "evaluators": [{"evaluator": "token_f1"}],
                    "judge": {"consistency_rate": 0},
                },
            ],
        }
    )


def _events(count: int, share: float, tag: str) -> tuple[list[bytes], set[str]]:
    every = max(1, round(1 / share)) if share > 0 else 0
    out, judged = [], set()
    for n in range(count):
        event = {
            "id": f"{tag}-{n}",
            "model": "bench-model",
            "input": f"Capital of France? ({n})",
            "output": f"Paris ({tag} {n})",
            "expected": "Paris",
        }
        if every and n % every == every // 2:
            event["category"] = "judged_qa"
            judged.add(event["id"])
        out.append(orjson.dumps(event))
    return out, judged


def _baseline_tree(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "stream", "agents", "schemas", "examples"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / "streameval"
    (into / "stream").rename(package)
    for sub in ("agents", "schemas", "examples"):
        (into / sub).rename(package / sub)
    return into


async def _run(
    bootstrap: str, redis_url: str, url: str, args: argparse.Namespace, pythonpath: str | None
) -> dict[str, object]:
    tag = uuid.uuid4().hex[:6]
    topics = topic_names(tag)
    await ensure_topics(bootstrap, topics.values(), partitions=1)
    warm, _ = _events(50, 0.0, f"warm{tag}")
    events, judged = _events(args.events, args.judged_share, f"ev{tag}")
    sent: dict[str, float] = {}
    delay: dict[str, float] = {}

    warmed: set[str] = set()

    def record(r: Record) -> None:
        event_id = orjson.loads(r.value)["id"]
        if event_id in sent:
            delay.setdefault(event_id, time.time() - sent[event_id])
        else:
            warmed.add(event_id)

    async def started() -> None:
        await produce(bootstrap, topics["requests"], warm)
        while len(warmed) < len(warm):  # the worker joined its group and answers: start the clock
            await asyncio.sleep(0.01)
        start = time.monotonic()
        for n in range(0, len(events), 10):  # steady rate, 10 events at a time
            await asyncio.sleep(max(0.0, start + n / args.rate - time.monotonic()))
            now = time.time()
            for raw in events[n : n + 10]:
                sent[orjson.loads(raw)["id"]] = now
            await produce(bootstrap, topics["requests"], events[n : n + 10])

    env = {"PYTHONPATH": pythonpath} if pythonpath else None
    run = await run_workers(
        bootstrap,
        redis_url,
        topics,
        len(warm) + len(events),
        _config(url),
        on_record=record,
        started=started,
        env=env,
    )
    rules = sorted(v for k, v in delay.items() if k not in judged)
    panel = sorted(v for k, v in delay.items() if k in judged)
    return {"rules": rules, "judged": panel, "cpu_us": run.cpu_us_per_event}


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"median {statistics.median(values) * 1000:7.0f} ms, p90 {q[89] * 1000:7.0f} ms, "
        f"p99 {q[98] * 1000:7.0f} ms, max {values[-1] * 1000:7.0f} ms ({len(values)})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=300.0, help="events per second produced")
    parser.add_argument("--judged-share", type=float, default=0.1)
    parser.add_argument("--judge-ms", type=float, default=2000.0)
    parser.add_argument(
        "--baseline",
        default="merge-base",
        help="git ref of the baseline; default: where this branch left main",
    )
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    if args.baseline == "merge-base":
        merge_base = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True, text=True
        )
        args.baseline = merge_base.stdout.strip()[:12] or "main"
    redis_url, embedded = pick_redis()
    results: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="rules-latency-") as tmp, EmbeddedBroker() as broker:
        async with start_judge_sim(latency_ms=args.judge_ms) as url:
            variants: list[tuple[str, str | None]] = [("this", None)]
            if not args.no_baseline:
                tree = _baseline_tree(args.baseline, Path(tmp))
                variants.insert(0, (args.baseline, os.pathsep.join([str(tree), str(ROOT / "bench")])))
            for label, pythonpath in variants:
                step(
                    f"{label}: {args.events} events at {args.rate:g}/s, {args.judged_share:g} judged ({args.judge_ms:g} ms)"
                )
                results.append((label, await _run(broker.bootstrap, redis_url, url, args, pythonpath)))
    if embedded:
        embedded.stop()
    print(
        f"{args.events} events at {args.rate:g}/s; {args.judged_share:g} of them judged by a judge answering "
        f"after {args.judge_ms:g} ms; delay = result arrival - send"
    )
    for label, figures in results:
        print(f"{label:>12}: rule results   {_quantiles(figures['rules'])}")  # type: ignore[arg-type]
        print(f"{'':>12}  judged results {_quantiles(figures['judged'])}")  # type: ignore[arg-type]
        print(f"{'':>12}  worker CPU {figures['cpu_us']:.0f} µs/event")
    if len(results) == 2:
        (_, base), (_, ours) = results
        b, o = base["rules"], ours["rules"]
        print(
            f"{'ratio':>12}: rule-result median delay {statistics.median(o) / statistics.median(b):.3f}x, "  # type: ignore[arg-type]
            f"p99 {statistics.quantiles(o, n=100)[98] / statistics.quantiles(b, n=100)[98]:.3f}x, "  # type: ignore[arg-type]
            f"worker CPU per event {float(ours['cpu_us']) / float(base['cpu_us']):.3f}x"
        )  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main())
