"""Throughput of the streameval worker against a raw aiokafka loop, same broker, same events, one run.

    python bench/throughput.py [--events 20000] [--workload rules|demo] [--eval-processes 0,2] [--scaling]

(a) baseline: a raw aiokafka consume -> transform (parse, add a field, serialise) -> produce loop;
(a') the same raw loop whose transform is the suite's evaluation in-process (decode, route, evaluate,
     encode the result; no Faust, Redis, idempotency or windows): what a hand-written single-process
     evaluator does (only for suites without judges or async evaluators);
(b) one ``streameval worker`` process per value of ``--eval-processes`` (STREAMEVAL_EVAL_PROCESSES).
``--workload rules`` (default): the issue's rule-only suite (seed 001 presets + token_f1 + rouge_l +
bleu) on 300-token outputs; ``demo``: examples/suites.yaml on the example events (or ``--config FILE``).
(c) with ``--scaling``: one worker, then two workers, on a two-partition topic.
Each rate is measured from the first output record to the last (Faust's group join excluded).
Also printed: the worker's RSS (with its evaluation processes) and its slope over the run's second half
(kB per 100 k events). Redis: REDIS_URL, else 127.0.0.1:6379, else an embedded server. Nothing is
asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from pathlib import Path

from _worker import (
    ROOT,
    RULE_SUITE,
    WorkerRun,
    demo_events,
    pick_redis,
    raw_eval_loop,
    raw_loop,
    rule_events,
    run_workers,
    slope_kb_per_100k,
    step,
    topic_names,
    write_config,
)

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--workload", choices=("rules", "demo"), default="rules")
    parser.add_argument("--config", type=Path, help="suite file for --workload demo (default examples/suites.yaml)")
    parser.add_argument("--eval-processes", default="0",
                        help="comma-separated STREAMEVAL_EVAL_PROCESSES values, one worker run each (default 0)")
    parser.add_argument("--scaling", action="store_true", help="also 1 vs 2 workers on a two-partition topic")
    parser.add_argument("--memory", action="store_true",
                        help="long runs: skip the baselines, count progress in Redis instead of reading results "
                             "(Tansu slows down serving a topic of a million records), report RSS")
    args = parser.parse_args()
    processes = [int(n) for n in args.eval_processes.split(",")]
    if args.workload == "rules":
        events, config = rule_events(args.events), write_config(RULE_SUITE)
    else:
        events, config = demo_events(args.events), args.config or ROOT / "examples" / "suites.yaml"
    redis_url, embedded = pick_redis()
    run = uuid.uuid4().hex[:6]
    with EmbeddedBroker() as broker:
        raw_in, raw_out = f"bench{run}.raw.in", f"bench{run}.raw.out"
        await ensure_topics(broker.bootstrap, [raw_in, raw_out, f"{raw_out}.eval"], partitions=1)
        if not args.memory:
            step(f"producing {len(events)} events")
            await produce(broker.bootstrap, raw_in, events)
        baseline, evaluating = float("nan"), None
        if not args.memory:
            step("(a) raw aiokafka loop")
            baseline = await raw_loop(broker.bootstrap, raw_in, raw_out, len(events))
            step(f"(a) {baseline:.0f} events/s; (a') raw loop evaluating in-process")
            try:
                evaluating = await raw_eval_loop(broker.bootstrap, raw_in, f"{raw_out}.eval", len(events), config)
            except RuntimeError as exc:
                step(f"(a') skipped: {exc}")
        runs: list[tuple[int, WorkerRun]] = []
        for n in processes:
            own = topic_names(uuid.uuid4().hex[:6])
            await ensure_topics(broker.bootstrap, own.values(), partitions=1)
            await produce(broker.bootstrap, own["requests"], events)
            step(f"(b) one streameval worker, {n} evaluation process(es) (~6 s group join before timing)")
            env = {"STREAMEVAL_EVAL_PROCESSES": str(n)}
            runs.append((n, await run_workers(broker.bootstrap, redis_url, own, len(events), config, env=env,
                                              progress="redis" if args.memory else "results")))  # fmt: skip
        scaled: list[WorkerRun] = []
        if args.scaling:
            for workers in (1, 2):
                two = topic_names(uuid.uuid4().hex[:6])
                await ensure_topics(broker.bootstrap, two.values(), partitions=2)
                await produce(broker.bootstrap, two["requests"], events)  # no key: spread over both partitions
                step(f"(c) {workers} worker(s), two partitions")
                res = await run_workers(broker.bootstrap, redis_url, two, len(events), config, workers=workers,
                                        partitions=2, env={"STREAMEVAL_EVAL_PROCESSES": str(processes[0])})  # fmt: skip
                scaled.append(res)
    if embedded:
        embedded.stop()
    size = sum(map(len, events)) / len(events)
    print(f"events: {len(events)} ({args.workload}, mean {size:.0f} bytes), Redis {redis_url.split('@')[-1]}")
    print(f"(a) raw aiokafka consume->transform->produce: {baseline:10.0f} events/s")
    if evaluating is not None:
        print(f"(a') raw loop evaluating in-process:          {evaluating:10.0f} events/s")
    for n, seen in runs:
        line = f"(b) one worker, {n} evaluation process(es): {seen.rate:8.0f} events/s   ratio to (a) {seen.rate / baseline:.3f}"
        if evaluating is not None:
            line += f", to (a') {seen.rate / evaluating:.3f}"
        print(line + "   (target >= 0.5)")
        print(f"    CPU per event (worker + evaluation processes): {seen.cpu_us_per_event:.0f} us")
        print(f"    RSS (worker + evaluation processes): {seen.rss[0][2][0] if seen.rss else 0} kB at start, "
              f"{seen.rss[-1][2][0] if seen.rss else 0} kB at the end; slope {slope_kb_per_100k(seen.rss):.0f} kB "
              "per 100 k events (second half)")  # fmt: skip
        last = seen.rss[-1][2][0] if seen.rss else None  # the final sample may precede the last count
        quarters = [next((rss[0] for _, n, rss in seen.rss if n >= q * len(events) // 4), last) for q in (1, 2, 3, 4)]
        print(f"    RSS at 1/4, 1/2, 3/4 and all of the events: {', '.join(f'{kb} kB' for kb in quarters)}")
    if scaled:
        one, two = scaled
        print(f"(c) two partitions: one worker {one.rate:.0f} events/s, two workers {two.rate:.0f} events/s; "
              f"ratio {two.rate / one.rate:.2f}   (target >= 1.7)")  # fmt: skip
        print(f"    CPU per event: one worker {one.cpu_us_per_event:.0f} us, two workers {two.cpu_us_per_event:.0f} us "
              "(equal = the second worker adds no work of its own: the rate then scales with free cores)")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
