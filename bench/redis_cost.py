"""What recording events costs Redis: CPU, memory, commands; this checkout against a baseline git ref.

    python bench/redis_cost.py [--events 20000] [--batch 256] [--spread-s 0] [--baseline REF] [--no-baseline]
                               [--split SHARE] [--profile]
    python bench/redis_cost.py --worker --segments  # two slice dimensions against the default worker
    python bench/redis_cost.py --marks 1000000     # marks' bytes per event for one pair at volume
    python bench/redis_cost.py --cluster           # one node, a 3-master cluster, and one with replicas + WAIT

Each side runs in its own process against its own fresh ``redis-server`` (free loopback port, no
persistence), so INFO figures are that side's alone. Events: the demo suites (examples/suites.yaml)
over examples/events.jsonl with fresh ids and current timestamps (``--spread-s``: spread over that many
seconds, so that events fall in several windows, as a live stream's do), windows 60 and 3600 s
(``STREAMEVAL_WINDOWS=60,3600``), evaluated first (not measured), then recorded in batches as the
worker does (``ResultStore.record_many``). Figures, from ``INFO`` before and after:

* Redis CPU µs per event (``used_cpu_sys + used_cpu_user``) and the projected events/s per Redis core;
* commands per event (``INFO commandstats``; a script's inner calls count too);
* retained bytes per event (``used_memory`` delta), right after recording and once the redelivery
  horizon has passed (the stored results are dropped as their TTL would; the baseline keeps them for
  the whole ``STREAMEVAL_SEEN_TTL_S``), and the idempotency marks' share (``MEMORY USAGE``);
* worker CPU µs per event spent recording (``time.process_time``).

``--worker`` builds the store on both sides as the worker's composition root does for the demo suites with
default settings (the features on when configured; the label join's verdicts included), ``--features`` also
measures this checkout with each per-event feature turned on alone (its setting) and prints its extra cost.

``--segments`` also measures this checkout as a worker with two slice dimensions (``segments:``, docs/segments.md:
a customer tier of 50 values and a prompt version of 20, read from each event's metadata) and prints its extra
cost over this checkout's default worker and over the baseline's; its worker CPU adds the annotator's (each
event's values, taken while evaluating) to the recording's.

``BENCH_STORE_KW`` (JSON) passes options to this checkout's ``ResultStore``, e.g. ``{"examples": 0}``
to measure without the drill-down examples (with ``--no-baseline`` when the baseline lacks the option).

``--split SHARE`` also measures this checkout recording each batch in two phases, as the worker does
for a batch mixing judged and rule-only events: first the ``1 - SHARE`` of its events that call no
judge, then the judged ``SHARE`` (every ``1/SHARE``-th event), and prints the ratio to one call per batch.

``--usage`` also measures this checkout as a worker whose suite file adds ``prices:`` (every model priced),
events carrying a ``usage`` block (tokens, duration, finish reason), then the same with ``segments:`` (two
dimensions of at most 50 values each) and then with a ``budgets:`` entry, and prints each one's extra cost
over the worker's default (docs/performance.md, "What each feature costs").

``--profile`` adds ``INFO commandstats`` per command (calls and µs per event; a script's own time
includes its inner commands'). ``--marks N`` records N synthetic events of one model × suite and
weighs the marks (``MEMORY USAGE``), this checkout against the baseline. ``--cluster`` records the
demo events on one node, on a 3-master Redis Cluster and on 3 masters with a replica each with
``STREAMEVAL_REDIS_WAIT_REPLICAS=1``: recording rate (wall), worker CPU, Redis CPU summed over the
masters, and the events counted (they must all be, exactly once).

The baseline is ``git archive <ref> stream`` unpacked to a temporary directory and imported as
``streameval``. Nothing is asserted; the ratios are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = (60, 3600)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _load_code(code: Path) -> None:
    """Import ``streameval`` from ``code`` (a ``stream/`` directory) instead of the installed one."""
    spec = importlib.util.spec_from_file_location(
        "streameval", code / "__init__.py", submodule_search_locations=[str(code)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["streameval"] = module
    spec.loader.exec_module(module)


#: the slices of --segments: two dimensions of 50 and 20 values, read from each event's metadata
SEGMENTS = {"dimensions": {"tier": "metadata.bench_tier", "prompt": "metadata.bench_prompt"}}


def _segmented_suites() -> Any:
    """The demo suites with :data:`SEGMENTS` (this checkout only: the baseline has no ``segments:``)."""
    from streameval.config import parse_config_text

    text = (ROOT / "examples" / "suites.yaml").read_text()
    return parse_config_text(text + "\nsegments:\n" + _yaml(SEGMENTS), file="examples/suites.yaml")[1]


def _yaml(section: dict[str, Any]) -> str:
    import yaml

    return "".join(f"  {line}\n" for line in yaml.safe_dump(section).splitlines())


def _events(n: int, spread_s: float = 0.0) -> list[bytes]:
    """``n`` demo events with fresh ids; event times now, or spread evenly over the last ``spread_s`` seconds;
    each with a tier of 50 values and a prompt version of 20 in its metadata (the slices of --segments)."""
    import orjson

    templates = []
    for line in (ROOT / "examples" / "events.jsonl").read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and isinstance(event.get("output"), str) and "suite" not in event:
            templates.append(event)
    now = time.time()

    def stamp(i: int) -> str:
        at = now - spread_s + spread_s * i / n if spread_s else now
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"

    def metadata(template: dict[str, Any], i: int) -> dict[str, Any]:
        return {
            **(template.get("metadata") or {}),
            "bench_tier": f"tier-{i % 50}",
            "bench_prompt": f"v{i % 20}",
        }

    return [
        orjson.dumps(
            {
                **templates[i % len(templates)],
                "id": f"bench-{i:07d}",
                "timestamp": stamp(i),
                "metadata": metadata(templates[i % len(templates)], i),
            }
        )
        for i in range(n)
    ]


#: --usage: what the suite file adds (prices for every model; two slice dimensions; a budget)
USAGE_PRICES = {"currency": "USD", "models": {"*": {"input": 0.5, "output": 1.5, "cached_input": 0.25}}}
USAGE_SEGMENTS = {"dimensions": {"tier": "metadata.tier", "region": "metadata.region"}}
USAGE_BUDGETS = [
    {"name": "day", "scope": {"suite": "qa"}, "period": "day", "limit": 1000, "currency": "USD"},
    {
        "name": "gold",
        "scope": {"segment": {"dimension": "tier", "value": "t1"}},
        "period": "hour",
        "limit": 50,
        "currency": "USD",
    },
]


def _with_usage(raw: bytes, i: int) -> bytes:
    """A demo event with a usage block and two slice fields (5 tiers, 40 regions): deterministic per ``i``."""
    import orjson

    event = orjson.loads(raw)
    event["usage"] = {
        "input_tokens": 200 + (i * 37) % 1800,
        "cached_input_tokens": (i * 11) % 200,
        "output_tokens": 50 + (i * 53) % 700,
        "duration_ms": 80.0 + (i * 97) % 4000,
        "finish_reason": "length" if i % 17 == 0 else "stop",
    }
    event["metadata"] = {**event.get("metadata", {}), "tier": f"t{i % 5}", "region": f"r{i % 40}"}
    return orjson.dumps(event)


def _bench_suites(usage: dict[str, Any] | None) -> Any:
    """The demo suites, with --usage's sections added when ``usage`` says so."""
    import yaml

    from streameval.config import load_config, parse_config

    path = ROOT / "examples" / "suites.yaml"
    if not usage:
        return load_config(str(path))[1]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if usage.get("prices", True):
        data["prices"] = USAGE_PRICES
    if usage.get("segments"):
        data["segments"] = USAGE_SEGMENTS
    if usage.get("budgets"):
        data["budgets"] = USAGE_BUDGETS
    return parse_config(data, file=str(path))[1]


def _workload(n: int, spread_s: float = 0.0) -> tuple[Any, list[bytes]]:
    """The suites and ``n`` events: the demo suites (default) or, with ``BENCH_WORKLOAD=rules``, the rule-only
    suite on 300-token outputs (bench/_worker.py), one model x suite pair."""
    from streameval.config import load_config, parse_config

    if os.environ.get("BENCH_WORKLOAD") != "rules":
        return load_config(str(ROOT / "examples" / "suites.yaml"))[1], _events(n, spread_s)
    sys.path.insert(0, str(ROOT / "bench"))
    from _worker import RULE_SUITE, rule_events

    return parse_config(RULE_SUITE)[1], rule_events(n)


def _wait_for(port: int, timeout_s: float = 10.0) -> None:
    """Until the redis-server on ``port`` answers PING."""
    import redis

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            redis.Redis(port=port).ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _info(client: Any) -> dict[str, float]:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    memory = client.info("memory")
    return {
        "cpu": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "calls": float(sum(v["calls"] for v in stats.values())),
        "memory": float(memory["used_memory"]),
        "by_command": {
            k.removeprefix("cmdstat_"): (float(v["calls"]), float(v["usec"])) for k, v in stats.items()
        },
    }


async def _measure(
    events: int, batch: int, port: int, spread_s: float = 0.0, split: float = 0.0
) -> dict[str, float]:
    import redis
    import redis.asyncio as aioredis

    from streameval.pipeline import Pipeline
    from streameval.store import ResultStore

    usage = json.loads(os.environ.get("BENCH_USAGE", "null"))
    sliced = bool(os.environ.get("BENCH_SEGMENTS")) and not usage
    if usage or sliced:
        suites = _segmented_suites() if sliced else _bench_suites(usage)
        raws = _events(events, spread_s)
    else:
        suites, raws = _workload(events, spread_s)
    if usage:  # this checkout only: the annotators of the features on, and events with usage
        from streameval.features.setup import annotators

        pipeline = Pipeline(suites, annotators=annotators(suites))
        raws = [_with_usage(raw, i) for i, raw in enumerate(raws)]
    else:
        pipeline = Pipeline(suites)
    items: list[Any] = []
    for raw in raws:
        outcome = await pipeline.process(raw)
        assert outcome.result is not None, outcome.dead_letter
        entry = (outcome.result, outcome.result.model_dump_json().encode(), outcome.counters, raw)
        items.append((*entry, outcome.annotations) if usage else entry)
    annotate_us = 0.0
    if sliced:  # each event's slice values, as the pipeline's annotator notes them (timed apart)
        from streameval.features.setup import annotators
        from streameval.models import RequestEvent

        evaluated = [
            (RequestEvent.model_validate_json(raw), item[0], None)
            for raw, item in zip(raws, items, strict=True)
        ]
        slicing = annotators(suites)
        cpu0 = time.process_time()
        found = [
            a.annotate(evaluated[i : i + batch]) for a in slicing for i in range(0, len(evaluated), batch)
        ]
        annotate_us = (time.process_time() - cpu0) * 1e6 / len(items)
        flat = [
            [
                note
                for part in found[k * -(-len(evaluated) // batch) : (k + 1) * -(-len(evaluated) // batch)]
                for note in part
            ]
            for k in range(len(slicing))
        ]
        notes = [{a.key: per[j] for a, per in zip(slicing, flat, strict=True)} for j in range(len(items))]
        items = [(*item, note) for item, note in zip(items, notes, strict=True)]
    client = aioredis.Redis(port=port)
    sync = redis.Redis(port=port)
    if os.environ.get("BENCH_WORKER") or sliced:  # the store as the worker's composition root builds it
        store = _worker_store(client, suites, json.loads(os.environ.get("BENCH_WORKER") or "{}"))
    else:
        store = ResultStore(
            client, prefix="bench:", windows=WINDOWS, **json.loads(os.environ.get("BENCH_STORE_KW", "{}"))
        )
    new_api = hasattr(store, "keys")
    await store.record_many(
        [(items[0][0].model_copy(update={"id": "warm-up"}), b"x", None)]
    )  # load the scripts
    sync.config_resetstat()
    before = _info(sync)
    callgrind = os.environ.get("BENCH_CALLGRIND")
    if callgrind:  # count the server's instructions while the batches are recorded, and only then
        subprocess.run(
            ["callgrind_control", "-i", "on", os.environ["BENCH_REDIS_PID"]], check=True, capture_output=True
        )
    # published marks (when this side has them): each batch's results acknowledged by the broker once it is
    # recorded, as a worker's are; the marks ride along in the next batch's calls, the last ones on their own
    marking = hasattr(store, "published")
    receipts: list[Any] = []

    async def record(part: list[Any]) -> None:
        if not marking:
            await store.record_many(part)
            return
        from streameval.store import Receipt

        receipts.append(Receipt())
        await store.record_many(part, receipt=receipts[-1])

    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(0, len(items), batch):
        chunk = [c if new_api else c[:3] for c in items[i : i + batch]]
        if split:  # the rule-only part first, then the judged part (every 1/split-th event)
            step = max(1, round(1 / split))
            await record([c for n, c in enumerate(chunk) if n % step])
            await record([c for n, c in enumerate(chunk) if not n % step])
        else:
            await record(chunk)
        if marking:
            store.published(receipts)
            receipts.clear()
    if marking:
        await store.flush_published(0)
    worker_cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    instructions = 0.0
    if callgrind:
        pid = os.environ["BENCH_REDIS_PID"]
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)

        instructions = _callgrind_total(callgrind)
    after = _info(sync)
    marks = 0
    if new_api:  # the results' TTL has passed: drop them as Redis would, then weigh the marks
        for pattern in (
            "bench:*:res:*",
            "bench:*:rid:*",
            "bench:*:rb:*",
        ):  # results and their id index: same horizon
            for key in sync.scan_iter(match=pattern, count=10_000):
                sync.delete(key)
        for key in sync.scan_iter(match="bench:*:mk:*", count=10_000):
            marks += int(sync.memory_usage(key, samples=0) or 0)
    horizon = _info(sync)
    await client.aclose()
    n = float(events)
    cpu_us = (after["cpu"] - before["cpu"]) * 1e6 / n
    return {
        "events": n,
        "redis_cpu_us": cpu_us,
        "events_per_core": 1e6 / cpu_us if cpu_us else float("inf"),
        "commands": (after["calls"] - before["calls"]) / n,
        "bytes": (after["memory"] - before["memory"]) / n,
        "bytes_after_horizon": (horizon["memory"] - before["memory"]) / n,
        "mark_bytes": marks / n,
        "worker_cpu_us": worker_cpu * 1e6 / n + annotate_us,
        "annotate_us": annotate_us,
        "record_rate": n / wall,
        "instructions": instructions / n,
        "by_command": {name: (calls / n, usec / n) for name, (calls, usec) in after["by_command"].items()},
    }


def _callgrind_total(directory: str) -> float:
    """The instructions of every callgrind dump of the server (the one of the recording, with instrumentation
    off before and after it): the sum of their ``totals:`` lines (their ``summary:`` may say 0)."""
    deadline = time.monotonic() + 60
    while True:
        totals = []
        for path in Path(directory).glob("callgrind.out.*"):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("totals:"):
                    totals.append(float(line.split()[1]))
                    break
        if totals or time.monotonic() > deadline:
            return sum(totals)
        time.sleep(0.2)


def _worker_store(client: Any, suites: Any, overrides: dict[str, Any]) -> Any:
    """The store a worker builds for the demo suites with default settings plus ``overrides`` (e.g.
    ``{"examples": 20}``), features included: by ``streameval.runtime.open_store`` and the recorders of the
    features on (this checkout), or as the versions before them did (the label join's verdicts set after)."""
    from streameval import runtime
    from streameval.keyspace import Keys
    from streameval.settings import Settings

    settings = Settings(redis_prefix="bench:", windows=WINDOWS, **overrides)
    lateness = suites.windowing.allowed_lateness_s
    if "suites" not in inspect.signature(runtime.open_store).parameters:  # before the features were plug-ins
        from streameval.labels import LabelStore  # type: ignore[import-not-found]

        store = runtime.open_store(client, settings, allowed_lateness_s=lateness)
        if settings.label_join_ttl_s:
            store.verdicts = LabelStore(
                client, store.keys, join_ttl_s=settings.label_join_ttl_s, windows=WINDOWS, clock=store.now
            )
        return store
    from streameval.features.labels import LabelStore
    from streameval.features.setup import enabled

    on = enabled(settings, suites)
    labels = None
    if on.label_join_ttl_s:
        labels = LabelStore(client, Keys("bench:"), join_ttl_s=on.label_join_ttl_s, windows=WINDOWS)
    return runtime.open_store(client, settings, allowed_lateness_s=lateness, suites=suites, labels=labels)


#: the per-event features measured one at a time by --features (settings that turn each on alone)
FEATURES = {
    "drill-down examples": {"examples": 20},
    "compact scores (comparison)": {"compare_ttl_s": 3 * 86400},
    "label-join verdicts": {"label_join_ttl_s": 7 * 86400},
}


async def _evaluated(events: int) -> list[Any]:
    from streameval.config import load_config
    from streameval.pipeline import Pipeline

    _, suites = load_config(str(ROOT / "examples" / "suites.yaml"))
    pipeline = Pipeline(suites)
    items = []
    for raw in _events(events):
        outcome = await pipeline.process(raw)
        assert outcome.result is not None, outcome.dead_letter
        items.append((outcome.result, outcome.result.model_dump_json().encode(), outcome.counters, raw))
    return items


async def _measure_cluster(events: int, batch: int, ports: list[int], wait: int = 0) -> dict[str, float]:
    """Recording the same events on a Redis Cluster of ``ports`` (masters): rate, CPU, exact counts."""
    import redis

    from streameval.keyspace import connect
    from streameval.store import ResultStore

    items = await _evaluated(events)
    client = connect(f"redis+cluster://127.0.0.1:{ports[0]}")
    nodes = [redis.Redis(port=p) for p in ports]
    store = ResultStore(client, prefix="bench:", windows=WINDOWS, wait_replicas=wait)
    await store.record_many(
        [(items[0][0].model_copy(update={"id": "warm-up"}), b"x", None)]
    )  # load the scripts
    before = [_info(node)["cpu"] for node in nodes]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(0, len(items), batch):
        await store.record_many(items[i : i + batch])
    worker_cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    per_node = [(_info(node)["cpu"] - b) * 1e6 / events for node, b in zip(nodes, before, strict=True)]
    counted = sum(a.count for a in await store.all_time())
    await client.aclose()
    n = float(events)
    return {
        "events": n,
        "redis_cpu_us": sum(per_node),
        "busiest_node_us": max(per_node),
        "worker_cpu_us": worker_cpu * 1e6 / n,
        "record_rate": n / wall,
        "counted": counted - 1.0,
    }


def _start_node(
    directory: str, *, wrapper: Sequence[str] = (), options: Sequence[str] = (), timeout_s: float = 10.0
) -> tuple[int, subprocess.Popen[bytes]]:
    """One ``redis-server`` on a free loopback port, no persistence, answering PING once this returns.
    ``wrapper``: a command it runs under (e.g. valgrind); ``options``: more server options."""
    server = shutil.which("redis-server") or "redis-server"
    port = _free_port()
    proc = subprocess.Popen(
        [
            *wrapper,
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if wrapper else None,
    )
    try:
        _wait_for(port, timeout_s)
    except BaseException:
        proc.terminate()
        proc.wait()
        raise
    return port, proc


def _start_cluster(
    directory: str, masters: int = 3, replicas: int = 0
) -> tuple[list[int], list[subprocess.Popen[bytes]]]:
    """``masters`` cluster nodes with ``replicas`` each, no persistence (tests/cluster_support.py adds it)."""
    import redis

    ports: list[int] = []
    while len(ports) < masters * (1 + replicas):  # the cluster bus listens on port + 10000
        port = _free_port()
        if port + 10000 < 65536 and port not in ports:
            ports.append(port)
    procs = []
    for port in ports:
        os.makedirs(f"{directory}/{port}", exist_ok=True)
        procs.append(
            subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    f"{directory}/{port}",
                ],
                stdout=subprocess.DEVNULL,
            )
        )
    for port in ports:
        _wait_for(port)
    subprocess.run(
        [
            "redis-cli",
            "--cluster",
            "create",
            *(f"127.0.0.1:{p}" for p in ports),
            "--cluster-replicas",
            str(replicas),
            "--cluster-yes",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    deadline = time.monotonic() + 30

    def ready(port: int) -> bool:
        node = redis.Redis(port=port)
        role = node.info("replication")
        return bool(
            node.cluster("info").get("cluster_state") == "ok" and role.get("master_link_status", "up") == "up"
        )

    while not all(ready(p) for p in ports):
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark's Redis Cluster did not come up")
        time.sleep(0.2)
    return ports, procs


async def _measure_marks(events: int, port: int) -> dict[str, float]:
    """Idempotency marks of ``events`` events of one model × suite (the volume of one pair in one week)."""
    import redis
    import redis.asyncio as aioredis

    from streameval.models import EvaluatorResult, GradedResult, format_time
    from streameval.store import ResultStore

    client = aioredis.Redis(port=port)
    sync = redis.Redis(port=port)
    store = ResultStore(client, prefix="bench:", windows=WINDOWS, redelivery_ttl_s=0)
    new_api = hasattr(store, "keys")
    stamp = format_time(time.time())
    template = GradedResult(
        id="x",
        model="m",
        suite="s",
        score=0.5,
        passed=True,
        threshold=0.5,
        grade="pass",
        evaluators=[EvaluatorResult(name="ev", score=0.5, passed=True, weight=1)],
        event_time=stamp,
        evaluated_at=stamp,
        latency_ms=1.0,
        pipeline_version="bench",
    )
    cpu0 = float(sync.info("cpu")["used_cpu_user"]) + float(sync.info("cpu")["used_cpu_sys"])
    for first in range(0, events, 4096):
        chunk = [
            (template.model_copy(update={"id": f"m{i}"}), b"", None)
            for i in range(first, min(events, first + 4096))
        ]
        await store.record_many([c if new_api else c[:3] for c in chunk])  # type: ignore[misc]
    cpu = float(sync.info("cpu")["used_cpu_user"]) + float(sync.info("cpu")["used_cpu_sys"]) - cpu0
    marks = sum(
        int(sync.memory_usage(k, samples=0) or 0) for k in sync.scan_iter(match="bench:*:mk:*", count=10_000)
    )
    await client.aclose()
    return {"events": float(events), "mark_bytes": marks / events, "redis_cpu_us": cpu * 1e6 / events}


def redis_role(port: int) -> str:
    import redis

    return str(redis.Redis(port=port).info("replication")["role"])


def _child(args: argparse.Namespace) -> None:
    import asyncio

    if args.code:
        _load_code(Path(args.code))
    if args.cluster:
        directory = tempfile.mkdtemp(prefix="redis-cost-cluster-")
        ports, procs = _start_cluster(directory, replicas=1 if args.wait else 0)
        try:
            masters = [p for p in ports if redis_role(p) == "master"]
            print(json.dumps(asyncio.run(_measure_cluster(args.events, args.batch, masters, wait=args.wait))))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
            shutil.rmtree(directory, ignore_errors=True)
        return
    directory = tempfile.mkdtemp(prefix="redis-cost-")
    wrapper: list[str] = []
    if os.environ.get("BENCH_CALLGRIND"):
        os.environ["BENCH_CALLGRIND"] = (
            directory  # the server under callgrind, instrumentation off until recording
        )
        wrapper = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={directory}/callgrind.out.%p",
        ]
    port, proc = _start_node(directory, wrapper=wrapper, timeout_s=120 if wrapper else 10)
    os.environ["BENCH_REDIS_PID"] = str(proc.pid)
    try:
        if args.marks:
            print(json.dumps(asyncio.run(_measure_marks(args.marks, port))))
        else:
            print(json.dumps(asyncio.run(_measure(args.events, args.batch, port, args.spread_s, args.split))))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _run(
    label: str,
    args: argparse.Namespace,
    code: Path | None,
    split: float = 0.0,
    worker: dict[str, Any] | None = None,
    segments: bool = False,
    usage: dict[str, Any] | None = None,
) -> dict[str, float]:
    cmd = (
        [
            sys.executable,
            __file__,
            "--child",
            "--events",
            str(args.events),
            "--batch",
            str(args.batch),
            "--spread-s",
            str(args.spread_s),
            "--marks",
            str(args.marks),
            "--split",
            str(split),
            "--workload",
            args.workload,
        ]
        + (["--cluster"] if "cluster" in label else [])
        + (["--wait", "1"] if "WAIT" in label else [])
    )
    if code is not None:
        cmd += ["--code", str(code)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if worker is not None or args.worker:
        env["BENCH_WORKER"] = json.dumps(worker if worker is not None else json.loads(args.settings))
    if args.callgrind:
        env["BENCH_CALLGRIND"] = "1"
    if segments:
        env["BENCH_SEGMENTS"] = "1"
    if usage is not None:
        env["BENCH_USAGE"] = json.dumps(usage)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    if "counted" in figures:
        print(
            f"{label:>12}: recorded {figures['record_rate']:8,.0f} events/s, worker CPU {figures['worker_cpu_us']:6.1f} "
            f"µs/event, Redis CPU {figures['redis_cpu_us']:5.1f} µs/event over the masters (busiest "
            f"{figures['busiest_node_us']:.1f}), {figures['counted']:,.0f} of {figures['events']:,.0f} events counted"
        )
        return figures
    if args.marks:
        print(
            f"{label:>12}: marks {figures['mark_bytes']:5.1f} B/event for {args.marks:,} events of one pair "
            f"(Redis CPU {figures['redis_cpu_us']:.1f} µs/event, batches of 4,096)"
        )
        return figures
    print(
        f"{label:>12}: Redis CPU {figures['redis_cpu_us']:7.1f} µs/event ({figures['events_per_core']:9,.0f} events/s per core), "
        f"{figures['commands']:5.1f} commands/event, retained {figures['bytes']:7.0f} B/event, "
        f"{figures['bytes_after_horizon']:6.0f} B/event after the redelivery horizon (marks {figures['mark_bytes']:.0f}), "
        f"worker CPU {figures['worker_cpu_us']:6.1f} µs/event, recorded {figures.get('record_rate', 0):,.0f} events/s"
    )
    if figures.get("instructions"):
        print(
            f"{'':>14}Redis instructions per event while recording (callgrind): {figures['instructions']:,.0f}"
        )
    if args.profile:  # INFO commandstats: a script's time includes its inner commands' own
        for name, (calls, usec) in sorted(figures.get("by_command", {}).items(), key=lambda c: -c[1][1])[:12]:
            print(f"{'':>14}{name:<14} {calls:6.2f} calls/event {usec:6.2f} µs/event")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument(
        "--workload",
        choices=("demo", "rules"),
        default="demo",
        help="the demo suites (default) or the rule-only suite on 300-token outputs (one pair)",
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--spread-s",
        type=float,
        default=0.0,
        help="spread the event times over this many seconds before now (default 0: all now)",
    )
    parser.add_argument(
        "--baseline",
        default="merge-base",
        help="git ref of the baseline (its stream/ directory); default: where this branch left main",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--split",
        type=float,
        default=0.0,
        help="also record each batch in two phases with this judged share (e.g. 0.25)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print each command's calls and time per event"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="instead: recording rate and CPU on one node against a 3-master Redis Cluster, and "
        "on 3 masters with a replica each, waiting for it (STREAMEVAL_REDIS_WAIT_REPLICAS=1)",
    )
    parser.add_argument(
        "--worker",
        action="store_true",
        help="build the store as the worker does for the demo suites with default settings (features on "
        "when configured, the label join's verdicts included), on both sides",
    )
    parser.add_argument(
        "--settings",
        default="{}",
        metavar="JSON",
        help="with --worker: settings of both sides, e.g. '{\"examples\": 20}' (the same configuration before and after)",
    )
    parser.add_argument(
        "--features",
        action="store_true",
        help="also measure this checkout as a worker with each per-event feature turned on alone, and print "
        "its extra cost over the worker's default",
    )
    parser.add_argument(
        "--segments",
        action="store_true",
        help="also measure this checkout as a worker with two slice dimensions of 50 and 20 values (segments:)",
    )
    parser.add_argument(
        "--usage",
        action="store_true",
        help="also measure this checkout as a worker with prices: and events with usage, then with segments: "
        "(two dimensions) and a budget too, and print each one's extra cost over the worker's default",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="run each side's redis-server under callgrind and print its instructions per event while "
        "recording (the record, index and dead-letter calls; use fewer --events: ~50x slower)",
    )
    parser.add_argument("--wait", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--marks",
        type=int,
        default=0,
        metavar="N",
        help="instead: the idempotency marks' bytes per event for N events of one pair",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["BENCH_WORKLOAD"] = args.workload  # the children's events and suites
    if args.child:
        _child(args)
        return
    if args.cluster and not args.child:
        print(
            f"{args.events} events, demo suites, windows {','.join(map(str, WINDOWS))}, batches of {args.batch}"
        )
        one = _run("one node", args, None)
        three = _run("3-master cluster", args, None)
        waiting = _run("cluster with replicas, WAIT 1", args, None)
        print(
            f"{'ratio':>12}: recording rate {three['record_rate'] / one['record_rate']:.3f}x, "
            f"worker CPU {three['worker_cpu_us'] / one['worker_cpu_us']:.3f}x; with replicas and WAIT 1 "
            f"against the cluster without: recording rate {waiting['record_rate'] / three['record_rate']:.3f}x, "
            f"worker CPU {waiting['worker_cpu_us'] / three['worker_cpu_us']:.3f}x"
        )
        return
    if not args.marks:
        print(
            f"{args.events} events, {args.workload} suites, windows {','.join(map(str, WINDOWS))}, batches of {args.batch}"
            + (f", event times over {args.spread_s:g} s" if args.spread_s else "")
        )
    base = None
    if args.baseline == "merge-base":
        merge_base = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True, text=True
        )
        args.baseline = merge_base.stdout.strip()[:12] or "main"
    if not args.no_baseline:
        with tempfile.TemporaryDirectory(prefix="redis-cost-base-") as tmp:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "stream"], check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            base = _run(f"{args.baseline}", args, Path(tmp) / "stream")
    ours = _run("this", args, None)
    if base is not None and args.marks:
        print(f"{'ratio':>12}: marks {ours['mark_bytes'] / base['mark_bytes']:.3f}x")
    elif base is not None:
        print(
            f"{'ratio':>12}: Redis CPU {ours['redis_cpu_us'] / base['redis_cpu_us']:.3f}x, "
            f"commands {ours['commands'] / base['commands']:.3f}x, "
            f"retained after the horizon {ours['bytes_after_horizon'] / base['bytes_after_horizon']:.3f}x, "
            f"worker CPU {ours['worker_cpu_us'] / base['worker_cpu_us']:.3f}x"
        )
    if args.features:
        lean = ours if args.worker else _run("worker", args, None, worker={})
        print(f"{'':>12}  extra per event over the worker's default, each feature alone:")
        for name, overrides in FEATURES.items():
            one = _run(name[:12], args, None, worker=overrides)
            print(
                f"{'':>12}  {name}: Redis CPU {one['redis_cpu_us'] - lean['redis_cpu_us']:+.1f} µs, worker CPU "
                f"{one['worker_cpu_us'] - lean['worker_cpu_us']:+.1f} µs, kept after the horizon "
                f"{one['bytes_after_horizon'] - lean['bytes_after_horizon']:+.0f} B ({json.dumps(overrides)})"
            )
    if args.segments:
        lean = ours if args.worker else _run("worker", args, None, worker={})
        sliced = _run("2 dimensions", args, None, worker={}, segments=True)
        for name, other in (
            ("this checkout's default worker", lean),
            (f"the baseline ({args.baseline})", base),
        ):
            if other is None:
                continue
            print(
                f"{'':>12}  slices, extra per event over {name}: Redis CPU "
                f"{sliced['redis_cpu_us'] - other['redis_cpu_us']:+.1f} µs, commands "
                f"{sliced['commands'] - other['commands']:+.2f}, kept after the horizon "
                f"{sliced['bytes_after_horizon'] - other['bytes_after_horizon']:+.1f} B, worker CPU "
                f"{sliced['worker_cpu_us'] - other['worker_cpu_us']:+.1f} µs (of which annotating "
                f"{sliced['annotate_us']:.1f} µs)"
            )
    if args.usage:
        lean = ours if args.worker else _run("worker", args, None, worker={})
        print(f"{'':>12}  extra per event over the worker's default, with usage:")
        for name, usage in (
            ("2 slice dimensions alone (no usage)", {"segments": True, "prices": False}),
            ("usage + prices", {}),
            ("usage + prices + 2 slice dimensions", {"segments": True}),
            ("usage + prices + slices + 2 budgets", {"segments": True, "budgets": True}),
        ):
            one = _run(name[:12], args, None, worker={}, usage=usage or {"prices": True})
            print(
                f"{'':>12}  {name}: Redis CPU {one['redis_cpu_us'] - lean['redis_cpu_us']:+.1f} µs, worker CPU "
                f"{one['worker_cpu_us'] - lean['worker_cpu_us']:+.1f} µs, commands "
                f"{one['commands'] - lean['commands']:+.2f}, kept after the horizon "
                f"{one['bytes_after_horizon'] - lean['bytes_after_horizon']:+.0f} B"
            )
    if args.split:
        two = _run(f"2 phases {args.split:g}", args, None, args.split)
        print(
            f"{'ratio':>12}: two phases / one call per batch: Redis CPU {two['redis_cpu_us'] / ours['redis_cpu_us']:.3f}x, "
            f"commands {two['commands'] / ours['commands']:.3f}x, "
            f"worker CPU {two['worker_cpu_us'] / ours['worker_cpu_us']:.3f}x"
        )


if __name__ == "__main__":
    main()
