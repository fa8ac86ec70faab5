"""Cost of strict JSON decoding: pydantic alone vs the decode path with the strict checks.

Decodes the valid example events (examples/events.jsonl) repeatedly and prints µs per event for
pydantic's ``model_validate_json`` alone, the depth gate, the strict pass (duplicate keys, NaN) and
``Pipeline.decode`` as a whole, with the ratio decode / pydantic (the baseline, same run).

Usage: python bench/decode.py [--rounds 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from streameval.config import parse_config
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline
from streameval.strictjson import DEFAULT_MAX_EVENT_DEPTH, check_depth, check_strict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "events.jsonl"


def _valid_events() -> list[bytes]:
    out = []
    for line in EXAMPLES.read_bytes().splitlines():
        try:
            RequestEvent.model_validate_json(line)
        except ValueError:
            continue
        out.append(line)
    return out


def _per_event_us(fn: Callable[[bytes], object], events: list[bytes], rounds: int) -> float:
    start = time.perf_counter()
    for i in range(rounds):
        fn(events[i % len(events)])
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    events = _valid_events()
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    pipeline = Pipeline(suites)
    rows = {
        "pydantic model_validate_json (baseline)": RequestEvent.model_validate_json,
        "check_depth (gate)": lambda raw: check_depth(raw, max_depth=DEFAULT_MAX_EVENT_DEPTH),
        "check_strict (duplicate keys, NaN)": check_strict,
        "Pipeline.decode (all of the above)": pipeline.decode,
    }
    print(f"{len(events)} valid example events, {sum(map(len, events)) / len(events):.0f} bytes on average")
    base = 0.0
    for name, fn in rows.items():
        us = min(_per_event_us(fn, events, args.rounds) for _ in range(3))
        base = base or us
        print(f"{name:42s} {us:6.2f} µs/event  {us / base:5.2f}x baseline")


if __name__ == "__main__":
    main()
