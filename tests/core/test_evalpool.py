"""Evaluation processes (streameval.evalpool): same outcomes as in-process, judged suites stay in the
worker, latencies reach the worker's metrics, a killed process loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from streameval import telemetry
from streameval.config import parse_config_text
from streameval.evalpool import EvalPool
from streameval.judges.sim import demo_judges, start_judge_sim
from streameval.pipeline import Outcome, Pipeline, Source
from streameval.processor import Processor

SUITES: dict[str, Any] = {
    "suites": [
        {
            "name": "rules",
            "default": True,
            "evaluators": [
                {"evaluator": "exact_match"},
                {"evaluator": "token_f1"},
                {"evaluator": "rouge_l"},
                {"evaluator": "bleu"},
                {"evaluator": "similarity"},
                {"evaluator": "regex", "params": {"pattern": "paris", "flags": "i"}},
            ],
        },
        {"name": "chinese", "match": {"category": ["zh_*"]}, "evaluators": [{"evaluator": "token_f1"}]},
    ],
}


def _text(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, allow_unicode=True)


def _events() -> list[bytes]:
    out = [
        orjson.dumps(
            {
                "id": f"ev-{n}",
                "model": f"m{n % 3}",
                "input": "q",
                "output": f"Paris is the capital {n}",
                "expected": "Paris is the capital",
                "references": ["the capital is Paris"],
            }
        )
        for n in range(40)
    ]
    out.append(
        orjson.dumps(
            {
                "id": "zh-1",
                "model": "m",
                "input": "q",
                "output": "巴黎是法国的首都",
                "expected": "法国的首都是巴黎",
                "category": "zh_qa",
            }
        )
    )
    out += [
        b"{not json",
        b'{"id": "no-output", "model": "m", "input": "q"}',
        orjson.dumps({"id": "lost", "model": "m", "input": "q", "output": "x", "suite": "nope"}),
    ]
    return out


def _comparable(outcome: Outcome) -> dict[str, Any]:
    if outcome.result is not None:
        doc = orjson.loads(outcome.result.model_dump_json())
        doc.pop("evaluated_at"), doc.pop("latency_ms")
        return {"result": doc, "counters": outcome.counters}
    assert outcome.dead_letter is not None
    doc = orjson.loads(outcome.dead_letter.model_dump_json())
    doc.pop("failed_at")
    return {"dead_letter": doc}


def _latency_count(name: str) -> float:
    for metric in telemetry.EVALUATOR_LATENCY.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels.get("evaluator") == name:
                return sample.value
    return 0.0


async def test_outcomes_equal_in_process_evaluation_and_latencies_reach_the_worker() -> None:
    text = _text(SUITES)
    batch = [(raw, Source("t", 0, n)) for n, raw in enumerate(_events())]
    received_at = time.time()
    local = Pipeline(parse_config_text(text)[1])
    expected = [await local.process(raw, source, received_at=received_at) for raw, source in batch]
    pool = EvalPool(text, "<test>", 2, max_event_bytes=1 << 20, max_event_depth=64)
    await pool.start()
    try:
        assert len(pool.pids()) == 2 and os.getpid() not in pool.pids()
        before = _latency_count("bleu")
        found = await pool.evaluate(batch, received_at)
    finally:
        await pool.close()
    assert all(outcome is not None for outcome in found)
    assert [_comparable(o) for o in found if o is not None] == [_comparable(o) for o in expected]
    kinds = [o.dead_letter.kind for o in found if o is not None and o.dead_letter is not None]
    assert kinds == ["invalid_json", "schema", "unknown_suite"]
    assert _latency_count("bleu") - before == 40  # observed here, measured in the evaluation process


async def test_judged_suites_come_back_to_the_worker_and_are_evaluated_there() -> None:
    async with start_judge_sim() as url:
        config = {
            "judges": demo_judges(url),
            "suites": [
                {"name": "rules", "default": True, "evaluators": [{"evaluator": "token_f1"}]},
                {
                    "name": "judged",
                    "match": {"category": ["qa_*"]},
                    "evaluators": [{"evaluator": "exact_match"}],
                    "judge": {},
                },
            ],
        }
        text = _text(config)
        pipeline = Pipeline(parse_config_text(text)[1])
        pool = EvalPool(text, "<test>", 1, max_event_bytes=1 << 20, max_event_depth=64)
        processor = Processor(pipeline, store=None, pool=pool)  # type: ignore[arg-type]  # no recording here
        await processor.start()
        try:
            raws = [
                orjson.dumps(
                    {
                        "id": f"j{n}",
                        "model": "m",
                        "input": "What is the capital of France?",
                        "output": "Paris",
                        "expected": "Paris",
                        "category": "qa_simple" if n % 2 else None,
                    }
                )
                for n in range(6)
            ]
            batch = [(raw, Source("t", 0, n)) for n, raw in enumerate(raws)]
            in_pool = await pool.evaluate(batch, time.time())
            outcomes = await processor.evaluate_batch(batch)
        finally:
            await processor.close()
    assert [o is None for o in in_pool] == [False, True] * 3  # the pool leaves judged events to the worker
    assert [o.result.suite for o in outcomes if o.result] == ["rules", "judged"] * 3
    judged = [o.result for o in outcomes if o.result and o.result.suite == "judged"]
    assert all(r.judge is not None and len(r.judge.judges) == 3 for r in judged)


async def test_a_killed_process_loses_nothing_and_the_pool_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = _text(SUITES)
    pool = EvalPool(text, "<test>", 2, max_event_bytes=1 << 20, max_event_depth=64)
    await pool.start()
    batch = [(raw, Source("t", 0, n)) for n, raw in enumerate(_events()[:10])]
    try:
        old = pool.pids()
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        # a batch sent after the kill comes back unevaluated (None: the worker evaluates it), never lost
        deadline = time.monotonic() + 30
        while True:
            found = await pool.evaluate(batch, time.time())
            if all(o is None for o in found):
                break
            assert all(o is not None for o in found), "a batch is either evaluated or handed back whole"
            assert time.monotonic() < deadline, "the dead processes were never noticed"
            await asyncio.sleep(0.05)
        assert pool.restarts == 1
        again = await pool.evaluate(batch, time.time())
        assert all(o is not None and o.result is not None for o in again)
        assert set(pool.pids()).isdisjoint(old)
    finally:
        await pool.close()
    assert "an evaluation process died" in caplog.text


async def test_processor_without_pool_gives_the_same_outcomes_as_pipeline_process() -> None:
    text = _text(SUITES)
    pipeline = Pipeline(
        parse_config_text(text)[1], clock=lambda: 1_700_000_000.0
    )  # event_time of untimed events
    processor = Processor(pipeline, store=None)  # type: ignore[arg-type]
    batch = [(raw, Source("t", 0, n)) for n, raw in enumerate(_events())]
    outcomes = await processor.evaluate_batch(batch)
    expected = [await pipeline.process(raw, source) for raw, source in batch]
    assert [_comparable(o) for o in outcomes] == [_comparable(o) for o in expected]


def test_evaluation_processes_exit_when_the_worker_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "holder.py"
    script.write_text(
        "import asyncio, sys, time\n"
        "from streameval.evalpool import EvalPool\n"
        "async def main():\n"
        "    pool = EvalPool(sys.stdin.read(), 'suites', 2, max_event_bytes=1 << 20, max_event_depth=64)\n"
        "    await pool.start()\n"
        "    print(*pool.pids(), flush=True)\n"
        "    time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n"
    )
    holder = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write(_text(SUITES))
    holder.stdin.close()
    pids = [int(pid) for pid in holder.stdout.readline().split()]
    assert len(pids) == 2
    holder.kill()  # SIGKILL: no clean-up code runs in the worker
    holder.wait()
    deadline = time.monotonic() + 20
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        time.sleep(0.1)
    assert not alive, f"orphaned evaluation processes: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_pool_needs_a_process() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        EvalPool(_text(SUITES), "<test>", 0, max_event_bytes=1 << 20, max_event_depth=64)


async def test_evaluate_before_start_says_so() -> None:
    pool = EvalPool(_text(SUITES), "<test>", 1, max_event_bytes=1 << 20, max_event_depth=64)
    with pytest.raises(RuntimeError, match="not started"):
        await pool.evaluate([(b"{}", Source())], time.time())
