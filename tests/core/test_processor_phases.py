"""Processor.process_batch with ``emit``: results that call no judge are recorded and handed out before
the judged ones of the same batch, each only once recorded; a redelivery republishes the stored bytes
and counts nothing again. Real Redis, the simulated judge behind a gate the test opens."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import orjson
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.judges import sampled
from streameval.judges.sim import start_judge_sim
from streameval.models import GradedResult
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor, Publish
from streameval.store import Receipt, ResultStore

RATE = 0.5


class GatedTransport(httpx.AsyncBaseTransport):
    """Real HTTP to the simulated judge, held until ``gate`` opens (a judge as slow as the test wants)."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.inner = httpx.AsyncHTTPTransport()
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        await self.gate.wait()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _ids(run: str) -> tuple[str, str]:
    """An id the judged suite samples and one it leaves out."""
    candidates = [f"{run}-j{i}" for i in range(200)]
    return next(i for i in candidates if sampled(i, RATE)), next(
        i for i in candidates if not sampled(i, RATE)
    )


async def _counts(store: ResultStore) -> dict[tuple[str, str], float]:
    return {(a.model, a.suite): a.count for a in await store.all_time()}


async def test_rule_results_are_recorded_and_emitted_before_the_judged_ones(
    aredis: aioredis.Redis, prefix: str
) -> None:
    run = uuid.uuid4().hex[:8]
    judged_id, unsampled_id = _ids(run)
    raw = [
        orjson.dumps({"id": f"{run}-r1", "model": "m", "output": "Paris", "expected": "Paris"}),
        orjson.dumps(
            {"id": judged_id, "model": "m", "category": "jq", "output": "Paris", "expected": "Paris"}
        ),
        b"not json",
        orjson.dumps({"id": f"{run}-r2", "model": "m", "output": "Lyon", "expected": "Paris"}),
        orjson.dumps(
            {"id": unsampled_id, "model": "m", "category": "jq", "output": "Paris", "expected": "Paris"}
        ),
    ]
    batch = [(r, Source("in", 0, n)) for n, r in enumerate(raw)]
    gate = asyncio.Event()
    transport = GatedTransport(gate)
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    async with start_judge_sim() as url:
        _, suites = parse_config(
            {
                "judges": [
                    {
                        "name": "sim",
                        "protocol": "openai",
                        "base_url": f"{url}/v1",
                        "model": "simulated",
                        "weight": 1,
                    }
                ],
                "suites": [
                    {"name": "rules", "default": True, "evaluators": [{"evaluator": "exact_match"}]},
                    {
                        "name": "judged",
                        "match": {"category": ["jq"]},
                        "evaluators": [{"evaluator": "exact_match"}],
                        "judge": {"sample_rate": RATE, "consistency_rate": 0},
                    },
                ],
            }
        )
        processor = Processor(Pipeline(suites, judge_transport=transport), store)
        await processor.start()
        try:
            emitted: list[Publish] = []
            counted_when_emitted: list[dict[tuple[str, str], float]] = []

            async def emit(messages: list[Publish]) -> None:
                counted_when_emitted.append(await _counts(store))  # recorded before it is handed out
                emitted.extend(messages)

            task = asyncio.ensure_future(processor.process_batch(batch, emit=emit))
            for _ in range(1000):
                if emitted:
                    break
                await asyncio.sleep(0.01)
            assert transport.calls == 1 and not gate.is_set()  # the judged event is still waiting
            assert not task.done()
            early = [(m.kind, m.key) for m in emitted]
            assert early == [
                ("result", f"{run}-r1".encode()),
                ("deadletter", None),
                ("result", f"{run}-r2".encode()),
                ("result", unsampled_id.encode()),
            ]
            assert counted_when_emitted == [{("m", "rules"): 2.0, ("m", "judged"): 1.0}]
            unsampled = GradedResult.model_validate_json(emitted[3].value)
            assert unsampled.judge is not None and unsampled.judge.status == "unsampled"
            gate.set()
            [late] = await asyncio.wait_for(task, timeout=30)
            assert late.key == judged_id.encode()
            result = GradedResult.model_validate_json(late.value)
            assert result.judge is not None and result.judge.status == "ok"
            assert await _counts(store) == {("m", "rules"): 2.0, ("m", "judged"): 2.0}

            # a redelivery: the same bytes again, in the same two phases, and nothing counted twice
            again: list[Publish] = []

            async def emit_again(messages: list[Publish]) -> None:
                again.extend(messages)

            [late_again] = await processor.process_batch(batch, emit=emit_again)
            assert [m.value for m in again if m.kind == "result"] == [
                m.value for m in emitted if m.kind == "result"
            ]
            assert late_again.value == late.value
            assert await _counts(store) == {("m", "rules"): 2.0, ("m", "judged"): 2.0}

            # without emit: everything in input order, as before
            whole = await processor.process_batch(batch)
            assert [m.key for m in whole] == [
                f"{run}-r1".encode(),
                judged_id.encode(),
                None,
                f"{run}-r2".encode(),
                unsampled_id.encode(),
            ]
        finally:
            await processor.close()
            await transport.aclose()


async def test_a_batch_without_judged_events_is_recorded_once_and_emitted_whole(
    aredis: aioredis.Redis, prefix: str
) -> None:
    calls: list[Any] = []
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    record_many = store.record_many

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await record_many(*args, **kwargs)

    store.record_many = counting  # type: ignore[method-assign]
    _, suites = parse_config(
        {"suites": [{"name": "rules", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    processor = Processor(Pipeline(suites), store)
    await processor.start()
    try:
        run = uuid.uuid4().hex[:8]
        batch = [
            (
                orjson.dumps({"id": f"{run}-{n}", "model": "m", "output": "Paris", "expected": "Paris"}),
                Source("in", 0, n),
            )
            for n in range(5)
        ]
        emitted: list[Publish] = []

        async def emit(messages: list[Publish]) -> None:
            emitted.extend(messages)

        assert await processor.process_batch(batch, emit=emit) == []
        assert [m.key for m in emitted] == [f"{run}-{n}".encode() for n in range(5)]
        assert len(calls) == 1  # one Redis round for the whole batch, as without emit
    finally:
        await processor.close()


async def test_a_redelivered_batch_whose_results_the_broker_acknowledged_publishes_no_result_again(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    _, suites = parse_config(
        {"suites": [{"name": "rules", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    processor = Processor(Pipeline(suites), store)
    await processor.start()
    try:
        run = uuid.uuid4().hex[:8]
        raw = [orjson.dumps({"id": f"{run}-{n}", "model": "m", "output": "Paris"}) for n in range(4)]
        batch = [(r, Source("in", 0, n)) for n, r in enumerate([*raw, b"not json"])]
        receipts: list[Receipt] = []
        first = await processor.process_batch(batch, receipts=receipts)
        assert [m.kind for m in first] == ["result"] * 4 + ["deadletter"]
        # not acknowledged yet: a redelivery publishes the stored copies
        assert [m.value for m in await processor.process_batch(batch)][:4] == [m.value for m in first][:4]
        processor.published(receipts)
        again = await processor.process_batch(batch)
        assert [m.kind for m in again] == ["deadletter"]  # the results are on the topic already
        assert await _counts(store) == {("m", "rules"): 4.0}
    finally:
        await processor.close()
