"""The judged path's own CPU per judge call, with the HTTP answer given in-process (no sockets).

    .venv/bin/python bench/judge_path.py [--window 64] [--events 2000] [--rounds 3] [--callgrind]

A judged suite (exact_match + the demo panel of three judges, the default 10 % consistency repeats) runs
``Pipeline.process`` on distinct events with ``--window`` in flight, as bench/judges.py does, but each
judge's transport answers at once with the answer the simulated judge gave that judge in the warm-up:
what is measured is everything of a judged event except aiohttp and the sockets (decoding the event,
prompts, single-flight, the adaptive limit, the attempt's timeout, parsing the answer, verdicts, the
panel's blend and counters, the graded result). Printed: CPU per judge call (``time.process_time`` ÷
the calls in the results' window counters) and per event. bench/judges.py measures the same path with
the real HTTP client against the simulator; bench/judge_clients.py the HTTP client alone.

``--callgrind`` counts instructions instead (``valgrind --tool=callgrind``, repeatable on a shared
box): two child runs of one round, 200 and 800 events; instructions per call = the difference ÷ the
difference in calls. ``PYTHONPATH`` pointing at another checkout's package measures that code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

import orjson

from streameval.config import parse_config
from streameval.judges import _client, _transport
from streameval.judges.sim import demo_judges, start_judge_sim
from streameval.pipeline import Pipeline

_ANSWERS: dict[tuple[str, str], tuple[int, Mapping[str, str], bytes]] = {}


class _Instant(_transport.AiohttpTransport):
    """Records each judge's answer in the warm-up, then gives it back at once."""

    recording = True

    async def post(
        self,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        timeout: Mapping[str, float | None],
    ) -> tuple[int, Mapping[str, str], bytes]:
        key = (url, orjson.loads(content)["model"])
        if _Instant.recording:
            _ANSWERS[key] = await super().post(url, headers, content, timeout)
        return _ANSWERS[key]


def _event(n: int) -> bytes:
    return orjson.dumps(
        {
            "id": f"j-{n}",
            "model": "bench-model",
            "input": "What is the capital of France?",
            "output": f"The capital of France is Paris ({n}).",
            "expected": "Paris",
            "category": "qa_simple",
            "suite": "judged",
        }
    )


async def run(window: int, events: int, rounds: int) -> None:
    _client.AiohttpTransport = _Instant  # type: ignore[misc]  # what JudgeClient.start opens
    async with start_judge_sim() as url:
        judges = [{**j, "max_concurrency": window} for j in demo_judges(url)]
        _, suites = parse_config(
            {
                "judges": judges,
                "suites": [{"name": "judged", "evaluators": [{"evaluator": "exact_match"}], "judge": {}}],
            }
        )
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            await asyncio.gather(*(pipeline.process(_event(-n)) for n in range(1, 4)))
            _Instant.recording = False
            for r in range(rounds):
                calls, cpu = await _round(pipeline, window, events, r * 10**6)
                print(
                    f"round {r}: {events} events, {calls} calls, CPU {cpu / calls * 1e6:.1f} µs per call, "
                    f"{cpu / events * 1e6:.1f} µs per event",
                    flush=True,
                )
        finally:
            await pipeline.close()


async def _round(pipeline: Pipeline, window: int, events: int, offset: int) -> tuple[int, float]:
    """(judge calls, CPU seconds) of ``events`` distinct judged events, ``window`` in flight."""
    slots = asyncio.Semaphore(window)
    calls = 0

    async def one(n: int) -> None:
        nonlocal calls
        async with slots:
            outcome = await pipeline.process(_event(n + offset))
        assert outcome.result is not None and outcome.result.judge is not None
        assert outcome.result.judge.status == "ok", outcome.result.judge.reason
        for name, value in outcome.counters.get("judge_panel", {}).items():
            if name.endswith((".calls", ".repeat_calls")):
                calls += int(value)

    cpu = time.process_time()
    await asyncio.gather(*(one(n) for n in range(events)))
    return calls, time.process_time() - cpu


def _instructions(window: int, events: int) -> tuple[int, int]:
    """(instructions, calls) of one child run under callgrind."""
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--window",
            str(window),
            "--events",
            str(events),
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    calls = re.search(r"(\d+) calls", proc.stdout)
    if found is None or calls is None:
        raise RuntimeError(f"no count in the child's output: {proc.stdout[-300:]!r} {proc.stderr[-300:]!r}")
    return int(found.group(1)), int(calls.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, default=64, help="events in flight")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="count instructions per call instead")
    args = parser.parse_args(argv)
    if not args.callgrind:
        asyncio.run(run(args.window, args.events, args.rounds))
        return
    (i1, c1), (i2, c2) = _instructions(args.window, 200), _instructions(args.window, 800)
    print(
        f"instructions per judge call (callgrind, 800 - 200 events, window {args.window}): "
        f"{(i2 - i1) / (c2 - c1):,.0f}; per event {(i2 - i1) / 600:,.0f}"
    )


if __name__ == "__main__":
    main()
