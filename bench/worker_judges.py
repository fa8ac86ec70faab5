"""A worker with a judged suite: throughput against the ideal concurrency / latency, per concurrency.

    python bench/worker_judges.py [--concurrency 16,32,64,128] [--latency-ms 200] [--seconds 10]
                                  [--before DIR]

Three simulated judges (the multi-judge spec's panel; one subprocess, ``streameval.judges.sim``) answer after
``--latency-ms``; each allows C requests in flight (``max_concurrency``). Every event calls all three
at once, so no worker can beat ideal = C / latency events/s (Little's law: C in flight per judge,
each held for one latency). Distinct outputs: no judge cache hits; sample_rate 1.

How the rate is measured (so that it cannot exceed the ideal): the worker first handles 2 x C warm-up
events (Faust joined, judge connections open); then the clock starts, ``seconds`` x ideal events are
produced, and the rate is events / (the latest ``evaluated_at`` of their results - clock start), on
the box's one wall clock. This includes producing them and one round trip of fill and drain, so it
slightly under-states the steady rate; it excludes the result consumer's fetch wait (this script's
consumer, up to 500 ms per fetch against Tansu, not the worker). (Measured first result to last
arrival, as before, the first published batch of 256 results came free: C = 16 showed 1.13 x.)

Printed per C, all in the same run: the ideal; the ceiling (``bench/_judgesim.py``: a bare aiohttp
loop with 3 x C in flight against the same simulator, measured before and after the worker runs,
the higher of the two: what this box and simulator can serve); the
simulator's CPU per request and share of a core during the worker run; the worker's rate, rate /
ideal (target >= 0.9) and rate / ceiling; and the worker's CPU per judge call (its user + system time
per result while results flowed, over the judge calls per result: target <= 300 µs at C = 64). ``--before DIR`` also runs, for each C and just before the
current code, a worker whose ``streameval`` package is imported from DIR (e.g. an older checkout's
package tree), for a before / after comparison in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from datetime import datetime

import orjson
from _judgesim import Sim, bare_ceiling, panel_bodies, start_sim
from _worker import pick_redis, run_workers, step, topic_names, write_config

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import demo_judges
from streameval.kafka_io import Record, ensure_topics, produce
from streameval.models import PANEL_RESULT_NAME


def _events(count: int, tag: str) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "id": f"{tag}-{n}",
                "model": "bench-model",
                "input": "What is the capital of France?",
                "output": f"The capital of France is Paris ({tag} {n}).",
                "expected": "Paris",
                "category": "qa_simple",
            }
        )
        for n in range(count)
    ]


async def _worker_rate(
    bootstrap: str, redis_url: str, sim: Sim, c: int, count: int, pythonpath: str | None
) -> tuple[float, float, float]:
    """(events/s, simulator CPU seconds per request, worker CPU µs per judge call) of one worker at
    max_concurrency ``c``."""
    config = write_config(
        {
            "judges": [{**j, "max_concurrency": c} for j in demo_judges(sim.url)],
            "suites": [
                {"name": "judged", "default": True, "evaluators": [{"evaluator": "exact_match"}], "judge": {}}
            ],
        }
    )
    run_id = uuid.uuid4().hex[:6]
    topics = topic_names(run_id)
    await ensure_topics(bootstrap, topics.values(), partitions=1)
    warm, measured = _events(2 * c, f"warm{run_id}"), _events(count, f"ev{run_id}")
    evaluated: list[float] = []  # evaluated_at (epoch s) of every result
    clock: dict[str, float] = {}
    calls = [0]  # judge calls of all results: the panel's verdicts and the consistency repeats

    def record(r: Record) -> None:
        result = orjson.loads(r.value)
        evaluated.append(datetime.fromisoformat(result["evaluated_at"]).timestamp())
        calls[0] += len(result["judge"]["judges"])
        for evaluator in result["evaluators"]:
            if evaluator["name"] == PANEL_RESULT_NAME:
                calls[0] += len((evaluator.get("details") or {}).get("repeat") or {})

    async def started() -> None:
        await produce(bootstrap, topics["requests"], warm)
        while len(evaluated) < len(warm):
            await asyncio.sleep(0.01)
        clock["cpu"] = sim.cpu_s()
        clock["t0"] = time.time()
        await produce(bootstrap, topics["requests"], measured)

    env = {"PYTHONPATH": pythonpath} if pythonpath else None
    run = await run_workers(
        bootstrap, redis_url, topics, len(warm) + count, config, on_record=record, started=started, env=env
    )
    sim_cpu = sim.cpu_s() - clock["cpu"]
    # the worker's CPU per result while results flowed (bench/_worker.py), over the calls per result
    per_call = run.cpu_us_per_event / (calls[0] / len(evaluated))
    return count / (max(evaluated) - clock["t0"]), sim_cpu / (3 * count), per_call


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", default="16,32,64,128", help="max_concurrency of each judge, comma-separated"
    )
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--latency-dist", choices=["fixed", "uniform", "exponential"], default="fixed")
    parser.add_argument("--latency-spread-ms", type=float, default=0.0, help="for --latency-dist uniform")
    parser.add_argument("--seconds", type=float, default=10.0, help="events per run = this x the ideal rate")
    parser.add_argument("--ceiling-seconds", type=float, default=4.0)
    parser.add_argument("--before", default=None, help="PYTHONPATH of a baseline streameval to run first")
    args = parser.parse_args()
    latency_s = args.latency_ms / 1000
    sim = await start_sim(args.latency_ms, args.latency_dist, args.latency_spread_ms)
    redis_url, embedded = pick_redis()
    rows = []
    try:
        bodies = await panel_bodies()
        with EmbeddedBroker() as broker:
            for c in (int(v) for v in args.concurrency.split(",")):
                ideal = c / latency_s
                step(f"C={c}: ceiling (bare aiohttp loop, {3 * c} in flight)")
                ceilings = [(await bare_ceiling(sim.url, bodies, 3 * c, args.ceiling_seconds))[0] / 3]
                count = max(200, round(args.seconds * ideal))
                variants = [("before", args.before), ("after", None)] if args.before else [("current", None)]
                measured = []
                for label, path in variants:
                    step(f"C={c}: {label} worker, {count} events")
                    measured.append(
                        (label, *await _worker_rate(broker.bootstrap, redis_url, sim, c, count, path))
                    )
                step(f"C={c}: ceiling again")
                ceilings.append((await bare_ceiling(sim.url, bodies, 3 * c, args.ceiling_seconds))[0] / 3)
                step(
                    f"C={c}: ceilings {', '.join(f'{v:.0f}' for v in ceilings)} events/s; the higher is used"
                )
                rows += [
                    (c, label, ideal, max(ceilings), rate, sim_cpu, per_call)
                    for label, rate, sim_cpu, per_call in measured
                ]
    finally:
        sim.stop()
        if embedded:
            embedded.stop()
    print(
        f"3 simulated judges, latency {args.latency_ms:g} ms ({args.latency_dist}"
        f"{f' +/- {args.latency_spread_ms:g}' if args.latency_dist == 'uniform' else ''}), one simulator process"
    )
    print(
        "   C  code     ideal/s  ceiling/s  worker/s  worker/ideal  worker/ceiling  ceiling/ideal  sim us/req  sim core"
        "  worker us/call"
    )
    for c, label, ideal, ceiling, rate, sim_cpu, per_call in rows:
        print(
            f"{c:4d}  {label:7s} {ideal:8.0f} {ceiling:10.0f} {rate:9.0f} {rate / ideal:13.3f} {rate / ceiling:15.3f} "
            f"{ceiling / ideal:14.3f} {sim_cpu * 1e6:11.0f} {sim_cpu * 3 * rate:9.2f} {per_call:15.0f}"
        )
    print("target: worker/ideal >= 0.9; the simulator alone serves ~1 / (sim us/req) requests/s per core")
    print(
        "worker us/call: the worker's CPU (user + system) per result while results flowed, over the judge calls"
        " per result (the panel's verdicts and consistency repeats, counted in the results); target <= 300"
    )


if __name__ == "__main__":
    asyncio.run(main())
