"""The deadline (docs/guard.md, "Deadline"): a slow judge, a catastrophic regex and sandboxed code never hold
a check past it; past it the answer is the section's on_timeout (fail open or closed), said in the answer.
No wall time is asserted: each slow step would take 30 s or more, and every check is bounded by 20 s here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _guard_helpers import guard_of, raw

from streameval.features.guard._check import Guard
from streameval.judges.sim import start_judge_sim

BOUND_S = 20.0  # a check that is not answered by then hangs (the slow steps take 30 s or more)
EVIL = {"evaluator": "regex", "name": "evil", "params": {"pattern": "(a|aa)+$", "timeout_ms": 10_000}}
EVIL_OUTPUT = "a" * 60 + "b"  # (a|aa)+$ backtracks for ages on a run of a's that does not end the text


async def _check(guard: Guard, body: bytes) -> dict[str, Any]:
    await guard.start()
    try:
        return await asyncio.wait_for(guard.check(body), BOUND_S)
    finally:
        await guard.close()


def _judged(url: str, **guard: Any) -> Guard:
    judges = [
        {
            "name": "slow",
            "protocol": "openai",
            "base_url": f"{url}/v1",
            "model": "m",
            "weight": 1.0,
            "timeout_s": 60,
            "retry_wait_s": 0.01,
        }
    ]
    suite = {
        "name": "s",
        "default": True,
        "evaluators": [{"evaluator": "contains", "params": {"value": "Paris"}}],
        "judge": {"consistency_rate": 0, "sample_rate": 0.0},
        "guard": {"judges": True, **guard},
    }
    return guard_of([suite], judges=judges)


@pytest.mark.parametrize(("on_timeout", "mode"), [("block", "closed"), ("allow", "open")])
async def test_a_slow_judge_answers_on_timeout(on_timeout: str, mode: str) -> None:
    async with start_judge_sim(latency_ms=60_000) as url:
        answer = await _check(
            _judged(url, deadline_ms=200, on_timeout=on_timeout), raw("Paris", input="Capital of France?")
        )
    assert answer["decision"] == on_timeout
    assert answer["timedOut"] is True and answer["failMode"] == mode
    assert answer["reasons"] == [
        f"no answer within the deadline of 200 ms: fail {mode} (on_timeout: {on_timeout})"
    ]
    assert answer["score"] is None and answer["passed"] is None


async def test_a_judge_within_the_deadline_judges_every_check_whatever_its_sample_rate() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        answer = await _check(_judged(url, deadline_ms=10_000), raw("Paris", input="Capital of France?"))
    assert answer["timedOut"] is False and answer["judge"]["status"] == "ok"
    assert len(requests) == 1  # the stream's sample_rate 0 would judge none


async def test_without_judges_true_the_panel_is_not_asked() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        guard = _judged(url)
        suite = guard.guarded["s"]
        assert suite.suite.config.judge is not None  # judges: true keeps it
        no_panel = guard_of(
            [{**_suite_of(guard), "guard": {}}],
            judges=[j.model_dump(mode="json") for j in guard.routing.judges],
        )
        answer = await _check(no_panel, raw("Paris", input="Capital of France?"))
    assert answer["decision"] == "allow" and "judge" not in answer and requests == []


def _suite_of(guard: Guard) -> dict[str, Any]:
    config = guard.routing.all[0].config
    return config.model_dump(mode="json", exclude={"guard", "shadow", "label", "match"}, exclude_none=True)


@pytest.mark.parametrize(("on_timeout", "mode"), [("block", "closed"), ("allow", "open")])
async def test_a_catastrophic_regex_stops_at_the_deadline(on_timeout: str, mode: str) -> None:
    suite = {
        "name": "s",
        "default": True,
        "evaluators": [{"evaluator": "contains", "params": {"value": "a"}}, EVIL],
        "guard": {"deadline_ms": 50, "on_timeout": on_timeout},
    }
    answer = await _check(guard_of([suite]), raw(EVIL_OUTPUT))
    assert answer["decision"] == on_timeout and answer["timedOut"] is True and answer["failMode"] == mode
    evil = next(e for e in answer["evaluators"] if e["name"] == "evil")
    assert evil["error"] == "timeout" and evil["reason"] == "regex '(a|aa)+$' stopped at the check's deadline"


async def test_the_same_regex_on_the_stream_keeps_its_own_limit() -> None:
    from streameval.config import parse_config
    from streameval.pipeline import Pipeline

    suite = {
        "name": "s",
        "default": True,
        "evaluators": [{**EVIL, "params": {**EVIL["params"], "timeout_ms": 30}}],
    }
    _, loaded = parse_config({"suites": [suite]})
    pipeline = Pipeline(loaded)
    outcome = await pipeline.process(raw(EVIL_OUTPUT, id="e1"))
    assert outcome.result is not None
    assert outcome.result.evaluators[0].reason == "regex '(a|aa)+$' timed out after 30 ms"


async def test_sandboxed_code_is_cancelled_at_the_deadline() -> None:
    suite = {
        "name": "s",
        "default": True,
        "evaluators": [
            {
                "evaluator": "code",
                "name": "spin",
                "params": {
                    "language": "python",
                    "timeout_ms": 30_000,
                    "code": "def evaluate(i, o, e, m):\n    while True:\n        pass",
                },
            }
        ],
        "guard": {"deadline_ms": 300, "on_timeout": "allow"},
    }
    answer = await _check(guard_of([suite]), raw("anything"))
    assert answer["decision"] == "allow" and answer["timedOut"] is True and answer["failMode"] == "open"
