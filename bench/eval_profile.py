"""Per-event cost of the rule-only benchmark suite in-process, before and after the text-metric speed-ups.

    .venv/bin/python bench/eval_profile.py [--events 2000] [--rounds 3]

``Pipeline.process`` over bench/_worker.py's ``rule_events`` (300-token output and expected, ~3.3 kB)
with ``RULE_SUITE``, then each evaluator's ``evaluate`` on the decoded events. "before" runs the code
these speed-ups replaced (tests/metrics_baseline.py, patched in by bench/_baseline.py), "after" the
current code; the rounds alternate before/after in one process. Each cell is the fastest round and, in
brackets, the median and slowest: on a shared box the fastest round is the one other processes disturbed
least, and the speed-up is the ratio of the fastest rounds (the ratio of the medians is printed too).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baseline import baseline
from _worker import RULE_SUITE, rule_events, write_config

from streameval.config import load_config
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline

MODES: dict[str, Callable[[], AbstractContextManager[None]]] = {"before": baseline, "after": nullcontext}


def _suite_us(pipeline: Pipeline, events: list[bytes]) -> float:
    async def run() -> float:
        start = time.perf_counter()
        for raw in events:
            await pipeline.process(raw)
        return (time.perf_counter() - start) / len(events) * 1e6

    return asyncio.run(run())


def _evaluate_us(evaluate: Callable[[RequestEvent], object], events: list[RequestEvent]) -> float:
    start = time.perf_counter()
    for event in events:
        evaluate(event)
    return (time.perf_counter() - start) / len(events) * 1e6


def _cell(samples: list[float]) -> str:
    return f"{min(samples):7.1f} ({statistics.median(samples):.0f}, {max(samples):.0f})"


def _ratios(before: list[float], after: list[float]) -> str:
    return f"{min(before) / min(after):5.2f}x {statistics.median(before) / statistics.median(after):5.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    raw = rule_events(args.events)
    suites = load_config(write_config(RULE_SUITE))[1]
    pipeline = Pipeline(suites)
    asyncio.run(pipeline.start())
    decoded = [pipeline.decode(event) for event in raw[:500]]
    bindings = suites.route(decoded[0]).evaluators
    suite: dict[str, list[float]] = {mode: [] for mode in MODES}
    per: dict[tuple[str, str], list[float]] = {}
    _suite_us(pipeline, raw[:200])  # warm-up
    for _ in range(args.rounds):
        for mode, patched in MODES.items():
            with patched():
                suite[mode].append(_suite_us(pipeline, raw))
                for binding in bindings:
                    us = _evaluate_us(binding.evaluator.evaluate, decoded)
                    per.setdefault((binding.name, mode), []).append(us)

    print(f"rule suite, {args.events} events x {args.rounds} rounds; µs per event: fastest (median, slowest)")
    print(f"{'':16} {'before':>20} {'after':>20}  speed-up (fastest, median)")
    for binding in bindings:
        before, after = per[(binding.name, "before")], per[(binding.name, "after")]
        print(f"{binding.name:16} {_cell(before):>20} {_cell(after):>20}  {_ratios(before, after)}")
    before, after = suite["before"], suite["after"]
    print(f"{'Pipeline.process':16} {_cell(before):>20} {_cell(after):>20}  {_ratios(before, after)}")
    print(
        f"events/s on one core (fastest round): before {1e6 / min(before):,.0f}, after {1e6 / min(after):,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
