"""Cost of strict JSON decoding: pydantic alone vs the decode path with the strict checks, and the
decode of adversarial events of the size limit.

Part 1 decodes the valid example events (examples/events.jsonl) repeatedly and prints µs of process
CPU (and wall) per event for pydantic's ``model_validate_json`` alone, the depth gate, the strict
pass (duplicate keys, NaN, overflowing numbers) and ``Pipeline.decode`` as a whole, with the ratio
to pydantic (the baseline, same run).

Part 2 (``--hostile``) decodes 1 MiB adversarial events (unclosed strings, runs of backslashes,
bracket storms, lists of a million wrong items...) through ``Pipeline.process`` and prints ms of
process CPU per MiB, with the ratio to a plain 1 MiB event (one long ``output`` string, same run).

Usage: python bench/decode.py [--rounds 20000] [--hostile]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from streameval.config import parse_config
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline
from streameval.strictjson import DEFAULT_MAX_EVENT_DEPTH, check_depth, check_strict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "events.jsonl"
MIB = 1 << 20


def _valid_events() -> list[bytes]:
    out = []
    for line in EXAMPLES.read_bytes().splitlines():
        try:
            RequestEvent.model_validate_json(line)
        except ValueError:
            continue
        out.append(line)
    return out


def _per_event_us(fn: Callable[[bytes], object], events: list[bytes], rounds: int) -> tuple[float, float]:
    """(process CPU, wall) µs per event."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(rounds):
        fn(events[i % len(events)])
    return (time.process_time() - cpu) / rounds * 1e6, (time.perf_counter() - wall) / rounds * 1e6


def _fill(unit: bytes, head: bytes = b"", tail: bytes = b"", size: int = MIB - 64) -> bytes:
    body = size - len(head) - len(tail)
    return head + (unit * (body // len(unit) + 1))[:body] + tail


EVENT = b'{"id":"h","model":"m","output":"x","metadata":{"k":'
HOSTILE: dict[str, bytes] = {
    "plain 1 MiB output (baseline)": _fill(b"lorem ipsum ", b'{"id":"h","model":"m","output":"', b'"}'),
    '65 { then unclosed "\\ (was quadratic)': _fill(b'"\\', b"{" * 65),
    "unclosed string": _fill(b"a", b'{"id":"h","model":"m","output":"'),
    "run of backslashes in output": _fill(b"\\\\", b'{"id":"h","model":"m","output":"', b'"}'),
    "bracket storm [[[[": _fill(b"["),
    "bracket pairs [][]": _fill(b"[]"),
    "quote storm after 65 [": _fill(b'"', b"[" * 65),
    "metadata: 350k empty arrays": _fill(b"[],", EVENT + b"[", b"[]]}}"),
    "metadata: 350k empty objects": _fill(b"{},", EVENT + b"[", b"{}]}}"),
    "metadata: 500k numbers": _fill(b"1,", EVENT + b"[", b"1]}}"),
    "references: 500k non-strings": _fill(
        b"1,", b'{"id":"h","model":"m","output":"x","references":[', b"1]}"
    ),
    "80k unknown keys": b'{"id":"h","model":"m","output":"x",'
    + b"".join(b'"k%d":1,' % i for i in range(80_000))
    + b'"z":1}',
    "80k duplicate keys": b'{"id":"h","model":"m","output":"x","metadata":{'
    + b'"k":1,' * 170_000
    + b'"k":1}}',
}


def _hostile(pipeline: Pipeline) -> None:
    print("\n1 MiB adversarial events through Pipeline.process (best of 3, process CPU)")
    base = 0.0
    for name, raw in HOSTILE.items():
        best = float("inf")
        for _ in range(3):
            cpu = time.process_time()
            outcome = asyncio.run(pipeline.process(raw))
            best = min(best, time.process_time() - cpu)
        base = base or best
        kind = outcome.dead_letter.kind if outcome.dead_letter else "result"
        print(f"{name:42s} {best * 1000 * MIB / len(raw):7.1f} ms/MiB  {best / base:5.2f}x baseline  {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--hostile", action="store_true", help="also decode 1 MiB adversarial events")
    args = parser.parse_args()
    events = _valid_events()
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    pipeline = Pipeline(suites)
    rows = {
        "pydantic model_validate_json (baseline)": RequestEvent.model_validate_json,
        "check_depth (gate)": lambda raw: check_depth(raw, max_depth=DEFAULT_MAX_EVENT_DEPTH),
        "check_strict (duplicate keys, NaN, 1e999)": check_strict,
        "Pipeline.decode (all of the above)": pipeline.decode,
    }
    print(f"{len(events)} valid example events, {sum(map(len, events)) / len(events):.0f} bytes on average")
    base = 0.0
    for name, fn in rows.items():
        cpu, wall = min(_per_event_us(fn, events, args.rounds) for _ in range(3))
        base = base or cpu
        print(f"{name:42s} {cpu:6.2f} µs CPU/event  {wall:6.2f} µs wall  {cpu / base:5.2f}x baseline")
    if args.hostile:
        _hostile(pipeline)


if __name__ == "__main__":
    main()
