"""Where the record script's Redis time goes: µs per event in each step of one call, on the demo events.

    python bench/record_sections.py [--events 20000] [--batch 256] [--spread-s 0] [--examples 20]

Runs its own ``redis-server`` (free loopback port, no persistence), evaluates the demo suites
(examples/suites.yaml) over examples/events.jsonl as bench/redis_cost.py does (windows 60 and 3600 s),
then records them in batches with a copy of the record script (streameval._lua.record_script) and of the
index script that read the Redis clock (``TIME``, µs resolution) at the start of each step and add the
time spent since the last reading to a hash. Printed, per event: each step's time, their sum, the
scripts' own time from ``INFO commandstats`` (which includes the invocation: arguments and set-up),
and the server's CPU (``INFO cpu``: also the network, the plain commands and everything else).

The probes cost ~1 µs each per call (a ``TIME`` and an ``HINCRBY``), so sums come out a little high;
compare steps with each other, and runs with each other, not with bench/redis_cost.py's totals. The
steps are found by marker lines in the script (:data:`STEPS`); a script changed so that one is
missing stops the run with the marker's text. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from typing import Any

from redis_cost import ROOT, WINDOWS, _events, _start_node

#: (a line of the record script that starts a step, the name of the step that ends there)
STEPS = [
    ("local function holds", "marks: which buckets, HMGET this and the previous generation"),
    ("-- the target windows", "marks: look for each event in its bucket"),
    ("-- writes: the marks", "target windows: Redis clock, closed marks"),
    ("local pttl = tonumber(ARGV[9])", "marks: HSET the buckets"),
    ("-- add increments", "result pointers: HSET id -> pointer"),
    ("-- feature blocks", "aggregates: three packed hashes (HGET, unpack, add, pack, HSET)"),
]
_LAST = "feature blocks (the drill-down examples: ZADD, trim, TTL)"
_PROBE = """local __t = redis.call('TIME')
local __last = __t[1] * 1000000 + __t[2]
local function __step(name)
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  redis.call('HINCRBY', '__sections', name, now - __last)
  __last = now
end
"""


def instrumented(record: str, index: str) -> tuple[str, str]:
    """The record and index scripts with a probe at the start of each step."""
    out = _PROBE + record
    for marker, name in STEPS:
        if marker not in out:
            raise SystemExit(f"the record script changed: no line {marker!r}; update STEPS in {__file__}")
        out = out.replace(marker, f"__step({name!r})\n{marker}", 1)
    head, ret, tail = out.rpartition("return {'ok'}")
    head_i, ret_i, tail_i = index.rpartition("return 1")
    return (
        head + f"__step({_LAST!r})\n" + ret + tail,
        _PROBE + head_i + "__step('index script')\n" + ret_i + tail_i,
    )


async def _run(args: argparse.Namespace, port: int) -> None:
    import redis
    import redis.asyncio as aioredis

    from streameval import _lua
    from streameval.config import load_config
    from streameval.features.drilldown import ExamplesRecorder
    from streameval.pipeline import Pipeline
    from streameval.store import ResultStore

    _, suites = load_config(str(ROOT / "examples" / "suites.yaml"))
    pipeline = Pipeline(suites)
    items: list[Any] = []
    for raw in _events(args.events, args.spread_s):
        outcome = await pipeline.process(raw)
        assert outcome.result is not None, outcome.dead_letter
        items.append((outcome.result, outcome.result.model_dump_json().encode(), outcome.counters, raw))
    sync = redis.Redis(port=port)
    compose, index = _lua.record_script, _lua.INDEX
    _lua.record_script = lambda blocks=(): instrumented(compose(blocks), index)[0]  # type: ignore[assignment]
    _lua.INDEX = instrumented(compose(), index)[1]
    try:  # the store registers its scripts when it is built
        store = ResultStore(
            aioredis.Redis(port=port),
            prefix="bench:",
            windows=WINDOWS,
            recorders=[ExamplesRecorder(args.examples)] if args.examples else [],
        )
    finally:
        _lua.record_script, _lua.INDEX = compose, index  # type: ignore[assignment]
    await store.record_many([(items[0][0].model_copy(update={"id": "warm-up"}), b"x", None)])
    sync.delete("__sections")
    sync.config_resetstat()
    cpu0 = sync.info("cpu")
    for i in range(0, len(items), args.batch):
        await store.record_many(items[i : i + args.batch])
    cpu1 = sync.info("cpu")
    n = float(len(items))
    cpu = sum(float(cpu1[k]) - float(cpu0[k]) for k in ("used_cpu_user", "used_cpu_sys")) * 1e6 / n
    scripts = sync.info("commandstats").get("cmdstat_evalsha", {})
    steps = {k.decode(): int(v) / n for k, v in sync.hgetall("__sections").items()}
    print(
        f"{args.events:,} events, demo suites, windows 60,3600, batches of {args.batch}, spread over {args.spread_s:g} s, "
        f"{scripts.get('calls', 0) / n * args.batch:.1f} script calls per batch"
    )
    for name, _ in [*((name, 0) for _, name in STEPS), (_LAST, 0), ("index script", 0)]:
        print(f"  {steps.get(name, 0.0):6.2f} µs/event  {name}")
    print(f"  {sum(steps.values()):6.2f} µs/event  sum of the steps (with ~1 µs per probe and call)")
    print(
        f"  {scripts.get('usec', 0) / n:6.2f} µs/event  the scripts' own time (INFO commandstats, with their invocation)"
    )
    print(f"  {cpu:6.2f} µs/event  Redis CPU (INFO cpu: also the network and the plain commands)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--spread-s", type=float, default=0.0, help="spread the events' times over this many seconds"
    )
    parser.add_argument(
        "--examples", type=int, default=20, help="drill-down examples kept per window (0: none)"
    )
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="record-sections-")
    port, proc = _start_node(directory)
    try:
        asyncio.run(_run(args, port))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
