"""What a live worker costs Redis: one real worker fed from the broker, this checkout against a baseline git ref.

    python bench/live_redis_cost.py [--events 20000] [--workload demo|rules] [--baseline REF] [--no-baseline]

``bench/redis_cost.py`` measures the record calls alone, in batches it makes itself; a worker's batches are
what the consumer takes from the broker (``STREAMEVAL_BATCH_MAX``, ``STREAMEVAL_BATCH_WAIT_MS``), split by
model × suite pair and by the rule and judged phases. This script measures what the worker pays: per side,
a fresh ``redis-server`` (free loopback port, no persistence) and fresh topics on one embedded Tansu broker,
the events produced first, then one ``streameval worker`` process (``python -m streameval worker``; the
baseline's code through ``PYTHONPATH``: ``git archive <ref> stream`` unpacked) consumes them until every
result is on the results topic. From Redis ``INFO`` before the worker starts and after it stopped:

* Redis CPU µs per event (``used_cpu_sys + used_cpu_user``; the window closer's ticks included);
* record-script calls per event and events per call (``INFO commandstats``: ``evalsha`` calls, minus the
  index and dead-letter calls, one each per recorded batch: both counted as what they are, calls);
* Redis commands per event (a script's inner calls count too) and the memory kept per event at the end
  (``used_memory``: the results' copies, the marks, the aggregates).

Nothing is asserted; the ratios are printed. The events: the demo suites (examples/suites.yaml, no judge)
over the example events with fresh ids, or the rule-only suite on 300-token outputs (``--workload rules``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import redis
from _worker import RULE_SUITE, demo_events, rule_events, run_workers, step, topic_names, write_config
from redis_cost import _start_node

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce

ROOT = Path(__file__).resolve().parent.parent


def _figures(node: redis.Redis) -> dict[str, float]:
    cpu = node.info("cpu")
    stats = node.info("commandstats")
    return {
        "cpu": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "commands": float(sum(v["calls"] for v in stats.values())),
        "scripts": float(stats.get("cmdstat_evalsha", {}).get("calls", 0))
        + float(stats.get("cmdstat_eval", {}).get("calls", 0)),
        "memory": float(node.info("memory")["used_memory"]),
    }


async def _side(
    label: str,
    bootstrap: str,
    events: list[bytes],
    config: Path,
    code: Path | None,
    settings: dict[str, str],
) -> dict[str, float]:
    topics = topic_names(uuid.uuid4().hex[:6])
    await ensure_topics(bootstrap, topics.values(), partitions=1)
    await produce(bootstrap, topics["requests"], events)
    directory = tempfile.mkdtemp(prefix="bench-live-redis-")
    port, proc = _start_node(directory)
    env = dict(settings)
    if code is not None:  # the baseline's streameval ahead of the installed one
        env["PYTHONPATH"] = os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])
    node = redis.Redis(port=port)
    figures: list[dict[str, float]] = []
    try:
        before = _figures(node)
        step(f"{label}: one worker consuming {len(events):,} events")
        run = await run_workers(
            bootstrap,
            f"redis://127.0.0.1:{port}/0",
            topics,
            len(events),
            config,
            env=env,
            redis_ports=[port],
            tally=True,
            before_cleanup=lambda: figures.append(_figures(node)),
        )
        after = figures[0]
    finally:
        node.close()
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)
    n = float(len(events))
    calls = after["scripts"] - before["scripts"]
    counted = run.tally[0] if run.tally else 0
    return {
        "redis_cpu_us": (after["cpu"] - before["cpu"]) * 1e6 / n,
        "script_calls": calls / n,
        "events_per_call": n / calls if calls else float("nan"),
        "commands": (after["commands"] - before["commands"]) / n,
        "bytes": (after["memory"] - before["memory"]) / n,
        "worker_cpu_us": run.cpu_us_per_event,
        "rate": run.rate,
        "counted": float(counted),
    }


def _print(label: str, f: dict[str, float]) -> None:
    print(
        f"{label:>12}: Redis CPU {f['redis_cpu_us']:5.1f} µs/event, {f['script_calls']:.3f} script calls/event "
        f"({f['events_per_call']:.1f} events a call), {f['commands']:4.1f} commands/event, kept "
        f"{f['bytes']:6.0f} B/event, worker CPU {f['worker_cpu_us']:5.0f} µs/event, {f['rate']:6,.0f} events/s, "
        f"{f['counted']:,.0f} counted"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--workload", choices=("demo", "rules"), default="demo")
    parser.add_argument(
        "--baseline",
        default="merge-base",
        help="git ref of the baseline (default: where this branch left main)",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of both sides' worker, e.g. STREAMEVAL_BATCH_WAIT_MS=50 (repeatable)",
    )
    args = parser.parse_args()
    settings = dict(pair.split("=", 1) for pair in args.env)
    if args.workload == "rules":
        events, config = rule_events(args.events), write_config(RULE_SUITE)
    else:
        events, config = demo_events(args.events), ROOT / "examples" / "suites.yaml"
    print(
        f"{args.events:,} events, {args.workload} suites, one worker fed from the broker (default settings)"
    )
    if args.baseline == "merge-base":
        found = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True, text=True
        )
        args.baseline = found.stdout.strip()[:12] or "main"
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-live-base-") as tmp:
        base: dict[str, Any] | None = None
        if not args.no_baseline:
            parts = ("agents", "schemas", "examples")  # streameval.agents etc. (pyproject's package-dir)
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "stream", *parts],
                check=True,
                capture_output=True,
            )
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            os.rename(Path(tmp) / "stream", Path(tmp) / "streameval")
            for part in parts:
                os.rename(Path(tmp) / part, Path(tmp) / "streameval" / part)
            base = await _side(args.baseline, broker.bootstrap, events, config, Path(tmp), settings)
            _print(args.baseline, base)
        ours = await _side("this", broker.bootstrap, events, config, None, settings)
        _print("this", ours)
        if base is not None:
            print(
                f"{'ratio':>12}: Redis CPU {ours['redis_cpu_us'] / base['redis_cpu_us']:.3f}x, script calls "
                f"{ours['script_calls'] / base['script_calls']:.3f}x, kept {ours['bytes'] / base['bytes']:.3f}x, "
                f"worker CPU {ours['worker_cpu_us'] / base['worker_cpu_us']:.3f}x"
            )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
