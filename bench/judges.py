"""Judge panel throughput and rule-only latency under judge load.

Three simulated judges (the multi-judge spec's panel, 0.3/0.3/0.4) answer after a fixed latency (default 200
ms); the simulated judge runs in a subprocess so its CPU is not this process's. N judged events are
processed with W in flight (as the worker does). Printed:

* throughput / ideal, where ideal = W / latency (every event waits one judge round trip, judges of
  an event in parallel). Target >= 0.9. Also throughput / ceiling, the ceiling being a bare aiohttp
  loop with 3 W requests in flight against the same simulator in the same run (bench/_judgesim.py):
  what this box and simulator can serve at all.
* rule-only events' latency (a suite without judges) alone vs while the judged events run: p50/p99
  and their ratio against the idle baseline measured in the same run.
* worker CPU per judge call: this process's CPU time (``time.process_time``) over the judged run,
  divided by the HTTP calls it made (the results' window counters: primaries and consistency repeats). It
  includes prompt building, parsing, the panel, the pipeline and the rule-only trickle. Target
  <= 300 us. Printed next to it, measured in the same run: the bare aiohttp loop's own CPU per request
  (the floor of an aiohttp client), the simulator's CPU per call and the box's load average (the
  simulator and other processes share the cores: a throughput short of the ideal with the worker
  far from a full core is the box, not the worker). ``--no-trickle`` leaves the rule-only events out
of the judged run: the CPU per call is then the judged path's alone. The start-up heap is frozen
(``gc.freeze``) before the judged run, as the worker freezes it; ``--no-freeze`` leaves it (main
before the fourth pass). ``--consistency-rate`` (default the suite default, 0.1) and ``--duplicates`` (share of
  events repeating an earlier output, served by single-flight or the cache) change the call mix.

Usage: python bench/judges.py [--windows 16,32,64,128] [--per-window 30] [--latency-ms 200]
       [--consistency-rate R] [--duplicates D] [--no-trickle]
(N = per-window x window events for each window size.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time

import orjson
from _judgesim import Sim, bare_ceiling, panel_bodies, start_sim

from streameval.config import parse_config
from streameval.judges.sim import demo_judges
from streameval.pipeline import Pipeline


def _event(n: int, suite: str, output: int | None = None) -> bytes:
    return orjson.dumps(
        {
            "id": f"{suite}-{n}",
            "model": "bench-model",
            "input": "What is the capital of France?",
            "output": f"The capital of France is Paris ({n if output is None else output}).",
            "expected": "Paris",
            "category": "qa_simple",
            "suite": suite,
        }
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _rule_latencies(pipeline: Pipeline, count: int, stop: asyncio.Event | None = None) -> list[float]:
    out: list[float] = []
    for n in range(count):
        if stop is not None and stop.is_set():
            break
        began = time.perf_counter()
        # as a task, like the worker: the time includes waiting for the event loop, which judges share
        outcome = await asyncio.ensure_future(pipeline.process(_event(n, "rules")))
        out.append((time.perf_counter() - began) * 1000)
        assert outcome.result is not None
        await asyncio.sleep(0.002)  # a trickle of rule-only events, not a flood
    return out


async def run(
    windows: list[int],
    per_window: int,
    latency_ms: float,
    consistency: float | None,
    duplicates: float,
    no_trickle: bool = False,
    freeze: bool = True,
) -> None:
    bodies = await panel_bodies()
    sim = await start_sim(latency_ms)
    try:
        print(f"3 simulated judges at {latency_ms:g} ms (sim in a subprocess), {os.cpu_count()} cores")
        for window in windows:
            rate, bare_cpu = await bare_ceiling(sim.url, bodies, 3 * window, 4.0)
            await _one(
                sim,
                window * per_window,
                window,
                latency_ms,
                (rate / 3, bare_cpu),
                consistency,
                duplicates,
                no_trickle,
                freeze,
            )
    finally:
        sim.stop()


async def _one(
    sim: Sim,
    events: int,
    window: int,
    latency_ms: float,
    bare: tuple[float, float],
    consistency: float | None,
    duplicates: float,
    no_trickle: bool = False,
    freeze: bool = True,
) -> None:
    ceiling, bare_cpu = bare
    judges = [{**j, "max_concurrency": window} for j in demo_judges(sim.url)]
    judge_block = {} if consistency is None else {"consistency_rate": consistency}
    _, suites = parse_config(
        {
            "judges": judges,
            "suites": [
                {"name": "judged", "evaluators": [{"evaluator": "exact_match"}], "judge": judge_block},
                {
                    "name": "rules",
                    "evaluators": [
                        {"evaluator": "exact_match"},
                        {"evaluator": "contains", "params": {"value": "Paris"}},
                    ],
                },
            ],
        }
    )
    pipeline = Pipeline(suites)
    await pipeline.start()
    try:
        await asyncio.gather(
            *(pipeline.process(_event(-n, "judged")) for n in range(1, window + 1))
        )  # warm pools
        idle = await _rule_latencies(pipeline, 300)
        if freeze:  # what the worker does before it starts (streameval._util.freeze_heap)
            gc.collect()
            gc.freeze()

        slots = asyncio.Semaphore(window)
        failed = 0

        # every 1/duplicates-th event repeats the output of the one before it (same prompt)
        every = round(1 / duplicates) if duplicates > 0 else 0

        calls = hits = 0

        async def one(n: int) -> None:
            nonlocal failed, calls, hits
            async with slots:
                output = n - 1 if every and n % every == 0 else n
                outcome = await pipeline.process(_event(n, "judged", output))
                if (
                    outcome.result is None
                    or outcome.result.judge is None
                    or outcome.result.judge.status != "ok"
                ):
                    failed += 1
                # the window counters' rules: calls made (repeats included) and cache hits
                for name, value in outcome.counters.get("judge_panel", {}).items():
                    if name.endswith((".calls", ".repeat_calls")):
                        calls += int(value)
                    elif name.endswith(".cache_hits"):
                        hits += int(value)

        stop = asyncio.Event()
        cpu_began, sim_began = time.process_time(), sim.cpu_s()
        began = time.perf_counter()
        busy_task = asyncio.ensure_future(_rule_latencies(pipeline, 0 if no_trickle else 10**9, stop))
        await asyncio.gather(*(one(n) for n in range(events)))
        elapsed = time.perf_counter() - began
        cpu, sim_cpu = time.process_time() - cpu_began, sim.cpu_s() - sim_began
        stop.set()
        busy = await busy_task
    finally:
        await pipeline.close()

    ideal = window / (latency_ms / 1000.0)
    measured = events / elapsed
    print(f"\nwindow {window}: {events} judged events, failures {failed}, elapsed {elapsed:.2f} s")
    print(
        f"  throughput {measured:.1f} events/s ({3 * measured:.0f} judge calls/s); ideal {ideal:.1f}; "
        f"ratio {measured / ideal:.3f} (target >= 0.9)"
    )
    print(
        f"  ceiling (bare aiohttp loop, {3 * window} in flight) {ceiling:.1f} events/s = {ceiling / ideal:.3f} x ideal; "
        f"throughput / ceiling {measured / ceiling:.3f}"
    )
    print(
        f"  worker CPU {cpu:.2f} s for {calls} judge calls (+{hits} served by single-flight/cache): "
        f"{cpu / max(1, calls) * 1e6:.0f} us per call (target <= 300 us); {cpu / elapsed:.2f} cores"
    )
    print(
        f"  floor: the bare aiohttp loop's own CPU {bare_cpu * 1e6:.0f} us per request "
        f"(worker / bare {cpu / max(1, calls) / bare_cpu:.2f}); the simulator {sim_cpu / max(1, calls) * 1e6:.0f} us "
        f"per call, {sim_cpu / elapsed:.2f} cores; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    if not busy:  # --no-trickle
        return
    for label, values in (("idle", idle), ("busy", busy)):
        print(
            f"  rule-only latency {label}: n={len(values)} p50 {_pct(values, 0.5):.3f} ms  "
            f"p99 {_pct(values, 0.99):.3f} ms  mean {statistics.fmean(values):.3f} ms"
        )
    print(
        f"  rule-only busy/idle: p50 x{_pct(busy, 0.5) / _pct(idle, 0.5):.2f}, p99 x{_pct(busy, 0.99) / _pct(idle, 0.99):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="16,32,64,128", help="events in flight, comma-separated")
    parser.add_argument("--per-window", type=int, default=30, help="events per run = this x window")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--consistency-rate", type=float, default=None, help="the suite's consistency_rate (default 0.1)"
    )
    parser.add_argument(
        "--duplicates", type=float, default=0.0, help="share of events repeating an earlier output"
    )
    parser.add_argument(
        "--no-trickle",
        action="store_true",
        help="no rule-only events during the judged run: the CPU per call is the judged path's alone",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the start-up heap to the collector (the worker freezes it; main did not before the fourth pass)",
    )
    args = parser.parse_args()
    asyncio.run(
        run(
            [int(w) for w in args.windows.split(",")],
            args.per_window,
            args.latency_ms,
            args.consistency_rate,
            args.duplicates,
            args.no_trickle,
            not args.no_freeze,
        )
    )


if __name__ == "__main__":
    main()
