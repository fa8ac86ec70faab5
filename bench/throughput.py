"""Throughput of the streameval worker against a raw aiokafka loop, same broker, same events, one run.

    python bench/throughput.py [--events 20000] [--workload rules|demo] [--eval-processes 0,2] [--scaling]
                               [--redis-cluster]

(a) baseline: a raw aiokafka consume -> transform (parse, add a field, serialise) -> produce loop;
(a') the same raw loop whose transform is the suite's evaluation in-process (decode, route, evaluate,
     encode the result; no Faust, Redis, idempotency or windows): what a hand-written single-process
     evaluator does (only for suites without judges or async evaluators);
(b) one ``streameval worker`` process per value of ``--eval-processes`` (STREAMEVAL_EVAL_PROCESSES).
``--workload rules`` (default): the rule-only benchmark suite (the evaluator-module spec's presets + token_f1
+ rouge_l + bleu) on 300-token outputs; ``demo``: examples/suites.yaml on the example events (or ``--config
FILE``). (c) with ``--scaling``: one worker, then two workers, on a two-partition topic.
With ``--redis-cluster`` each (b) run is made twice, same events: against a fresh ``redis-server`` node,
then against a fresh 3-master Redis Cluster (``--cluster-first``: the other way round;
``redis+cluster://``; both on free loopback ports, no
persistence, REDIS_URL ignored); printed for each: the rate, the worker's CPU per event, the Redis CPU
per event summed over the nodes (INFO cpu, while results flowed and over the whole run, which
includes Faust's group join; each node's part of the latter too), the ratio
cluster / one node, and the events counted (all-time counts summed over the pairs, once the worker
stopped: each must be counted exactly once, none dead-lettered).
Each rate is measured from the first output record to the last (Faust's group join excluded).
Also printed: the worker's RSS (with its evaluation processes) and its slope over the run's second half
(kB per 100 k events). Redis: REDIS_URL, else 127.0.0.1:6379, else an embedded server. Nothing is
asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
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
from redis_cost import _start_cluster, _start_node

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--workload", choices=("rules", "demo"), default="rules")
    parser.add_argument(
        "--config", type=Path, help="suite file for --workload demo (default examples/suites.yaml)"
    )
    parser.add_argument(
        "--eval-processes",
        default="0",
        help="comma-separated STREAMEVAL_EVAL_PROCESSES values, one worker run each (default 0)",
    )
    parser.add_argument("--scaling", action="store_true", help="also 1 vs 2 workers on a two-partition topic")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="long runs: skip the baselines, count progress in Redis instead of reading results "
        "(Tansu slows down serving a topic of a million records), report RSS",
    )
    parser.add_argument(
        "--redis-cluster",
        action="store_true",
        help="run each (b) against a fresh redis-server node and a fresh 3-master Redis Cluster, "
        "same events: rates, worker and Redis CPU per event, ratio, events counted",
    )
    parser.add_argument(
        "--cluster-first",
        action="store_true",
        help="with --redis-cluster: the cluster run before the one-node run (to see an order effect)",
    )
    args = parser.parse_args()
    processes = [int(n) for n in args.eval_processes.split(",")]
    if args.workload == "rules":
        events, config = rule_events(args.events), write_config(RULE_SUITE)
    else:
        events, config = demo_events(args.events), args.config or ROOT / "examples" / "suites.yaml"
    redis_url, embedded = pick_redis()  # (c), and (b) without --redis-cluster
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
                evaluating = await raw_eval_loop(
                    broker.bootstrap, raw_in, f"{raw_out}.eval", len(events), config
                )
            except RuntimeError as exc:
                step(f"(a') skipped: {exc}")
        runs: list[tuple[int, WorkerRun]] = []
        placed: list[tuple[int, WorkerRun, WorkerRun]] = []  # --redis-cluster: (processes, one node, cluster)
        for n in processes:
            env = {"STREAMEVAL_EVAL_PROCESSES": str(n)}
            if args.redis_cluster:
                sides: dict[bool, WorkerRun] = {}
                for cluster in (True, False) if args.cluster_first else (False, True):
                    own = topic_names(uuid.uuid4().hex[:6])
                    await ensure_topics(broker.bootstrap, own.values(), partitions=1)
                    await produce(broker.bootstrap, own["requests"], events)
                    where = "a 3-master Redis Cluster" if cluster else "one Redis node"
                    step(
                        f"(b) one streameval worker, {n} evaluation process(es), {where} (~6 s group join before timing)"
                    )
                    sides[cluster] = await _on_fresh_redis(
                        cluster, broker.bootstrap, own, len(events), config, env
                    )
                placed.append((n, sides[False], sides[True]))
                continue
            own = topic_names(uuid.uuid4().hex[:6])
            await ensure_topics(broker.bootstrap, own.values(), partitions=1)
            await produce(broker.bootstrap, own["requests"], events)
            step(f"(b) one streameval worker, {n} evaluation process(es) (~6 s group join before timing)")
            runs.append(
                (
                    n,
                    await run_workers(
                        broker.bootstrap,
                        redis_url,
                        own,
                        len(events),
                        config,
                        env=env,
                        progress="redis" if args.memory else "results",
                    ),
                )
            )
        scaled: list[WorkerRun] = []
        if args.scaling:
            for workers in (1, 2):
                two = topic_names(uuid.uuid4().hex[:6])
                await ensure_topics(broker.bootstrap, two.values(), partitions=2)
                await produce(
                    broker.bootstrap, two["requests"], events
                )  # no key: spread over both partitions
                step(f"(c) {workers} worker(s), two partitions")
                res = await run_workers(
                    broker.bootstrap,
                    redis_url,
                    two,
                    len(events),
                    config,
                    workers=workers,
                    partitions=2,
                    env={"STREAMEVAL_EVAL_PROCESSES": str(processes[0])},
                )
                scaled.append(res)
    if embedded:
        embedded.stop()
    size = sum(map(len, events)) / len(events)
    where = redis_url.split("@")[-1]
    if args.redis_cluster:
        where = "(b) a fresh node and a fresh 3-master cluster" + (f", (c) {where}" if args.scaling else "")
    print(f"events: {len(events)} ({args.workload}, mean {size:.0f} bytes), Redis {where}")
    print(f"(a) raw aiokafka consume->transform->produce: {baseline:10.0f} events/s")
    if evaluating is not None:
        print(f"(a') raw loop evaluating in-process:          {evaluating:10.0f} events/s")
    for n, seen in runs:
        line = f"(b) one worker, {n} evaluation process(es): {seen.rate:8.0f} events/s   ratio to (a) {seen.rate / baseline:.3f}"
        if evaluating is not None:
            line += f", to (a') {seen.rate / evaluating:.3f}"
        print(line + "   (target >= 0.5)")
        print(f"    CPU per event (worker + evaluation processes): {seen.cpu_us_per_event:.0f} us")
        print(
            f"    RSS (worker + evaluation processes): {seen.rss[0][2][0] if seen.rss else 0} kB at start, "
            f"{seen.rss[-1][2][0] if seen.rss else 0} kB at the end; slope {slope_kb_per_100k(seen.rss):.0f} kB "
            "per 100 k events (second half)"
        )
        last = seen.rss[-1][2][0] if seen.rss else None  # the final sample may precede the last count
        quarters = [
            next((rss[0] for _, n, rss in seen.rss if n >= q * len(events) // 4), last) for q in (1, 2, 3, 4)
        ]
        print(f"    RSS at 1/4, 1/2, 3/4 and all of the events: {', '.join(f'{kb} kB' for kb in quarters)}")
    for n, node, cluster in placed:
        order = "cluster run first" if args.cluster_first else "one-node run first"
        print(
            f"(b) one worker, {n} evaluation process(es), one Redis node against a 3-master Redis Cluster ({order}):"
        )
        for label, seen in (("one node", node), ("cluster", cluster)):
            counted, pairs, dead = seen.tally or (-1, -1, -1)
            check = "exactly" if counted == len(events) and not dead else "NOT exactly"
            print(
                f"    {label:>8}: {seen.rate:8.0f} events/s   ratio to (a) {seen.rate / baseline:.3f}; "
                f"worker CPU {seen.cpu_us_per_event:.0f} us/event; Redis CPU {seen.redis_cpu_us_per_event:.1f} "
                f"us/event over the nodes while results flowed, {seen.redis_cpu_whole_s * 1e6 / len(events):.1f} "
                f"over the whole run (by node: {', '.join(f'{c * 1e6 / len(events):.1f}' for c in seen.redis_cpu_nodes_s)}); counted {counted} of {len(events)} events over {pairs} pair(s), "
                f"{dead} dead letter(s): {check} once"
            )
        print(
            f"    cluster / one node: rate {cluster.rate / node.rate:.3f}, worker CPU per event "
            f"{cluster.cpu_us_per_event / node.cpu_us_per_event:.3f}, Redis CPU per event "
            f"{cluster.redis_cpu_us_per_event / node.redis_cpu_us_per_event:.3f}   (target: rate >= 1.0 within noise)"
        )
    if scaled:
        one, two = scaled
        print(
            f"(c) two partitions: one worker {one.rate:.0f} events/s, two workers {two.rate:.0f} events/s; "
            f"ratio {two.rate / one.rate:.2f}   (target >= 1.7)"
        )
        print(
            f"    CPU per event: one worker {one.cpu_us_per_event:.0f} us, two workers {two.cpu_us_per_event:.0f} us "
            "(equal = the second worker adds no work of its own: the rate then scales with free cores)"
        )


async def _on_fresh_redis(
    cluster: bool, bootstrap: str, topics: dict[str, str], count: int, config: Path, env: dict[str, str]
) -> WorkerRun:
    """One worker run against a fresh redis-server node or 3-master cluster, stopped and removed afterwards."""
    directory = tempfile.mkdtemp(prefix="bench-throughput-redis-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if cluster:
            ports, procs = _start_cluster(directory)
            url = f"redis+cluster://127.0.0.1:{ports[0]}"
        else:
            port, proc = _start_node(directory)
            ports, procs, url = [port], [proc], f"redis://127.0.0.1:{port}/0"
        return await run_workers(
            bootstrap, url, topics, count, config, env=env, redis_ports=ports, tally=True
        )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
