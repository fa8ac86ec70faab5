"""Appending without idempotency marks, on a real Redis server: turns the worker vouches for (their
results were just counted for the first time) go in without a mark; any other turn is looked up, which
marks its session from the list, so a redelivered turn is still appended once, also when its first copy
was vouched for, dropped by the bounds, or its append call's reply was lost."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config_text
from streameval.errors import StoreUnavailable
from streameval.features.sessions.closer import once
from streameval.features.sessions.state import SessionStore, SessionTerms
from streameval.features.sessions.step import AppendTurns
from streameval.features.sessions.turns import Turn
from streameval.features.setup import annotators
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore


def turn(i: int, at: float, *, ident: str | None = None, key: str = "k", end: bool = False) -> Turn:
    ident = ident or f"t-{i}"
    return Turn("conv", key, ident, at, end, orjson.dumps({"id": ident, "t": at, "text": f"turn {i}"}))


def store(client: aioredis.Redis, prefix: str, *, max_turns: int = 500, grace: float = 60) -> SessionStore:
    return SessionStore(client, {"conv": SessionTerms(60, grace, max_turns, 1 << 20, 0.0)}, prefix=prefix)


async def meta(client: aioredis.Redis, state: SessionStore, key: str = "k") -> dict[bytes, bytes]:
    return await client.hgetall(state.keys.keys(state.keys.tag("conv", key))[1])  # type: ignore[no-any-return]


async def listed(client: aioredis.Redis, state: SessionStore, key: str = "k") -> list[str]:
    entries = await client.lrange(state.keys.keys(state.keys.tag("conv", key))[0], 0, -1)
    return [orjson.loads(entry[20:])["id"] for entry in entries]


def marks(fields: dict[bytes, bytes]) -> set[bytes]:
    return {field for field in fields if field.startswith(b"i:")}


async def test_vouched_turns_leave_no_marks_and_a_looked_up_one_marks_the_session(
    aredis: aioredis.Redis, prefix: str
) -> None:
    state = store(aredis, prefix)
    now = time.time()
    first = [turn(0, now - 3), turn(1, now - 2)]
    report = await state.append(first, {"t-0", "t-1"})
    assert dict(report.counts) == {("conv", "appended"): 2}
    fields = await meta(aredis, state)
    assert marks(fields) == set() and b"mk" not in fields  # nothing per turn in the meta
    # t-1 again (its result was counted before: not vouched for) with a new one
    report = await state.append([turn(1, now - 2), turn(2, now - 1)], {"t-2"})
    assert dict(report.counts) == {("conv", "duplicate"): 1, ("conv", "appended"): 1}
    assert await listed(aredis, state) == ["t-0", "t-1", "t-2"]
    fields = await meta(aredis, state)
    assert fields[b"mk"] == b"1" and marks(fields) == {b"i:t-0", b"i:t-1", b"i:t-2"}
    # marked: a vouched-for turn gets its mark too, and a look finds it
    await state.append([turn(3, now)], {"t-3"})
    assert b"i:t-3" in marks(await meta(aredis, state))
    report = await state.append([turn(3, now), turn(0, now - 3)])
    assert dict(report.counts) == {("conv", "duplicate"): 2}
    assert await listed(aredis, state) == ["t-0", "t-1", "t-2", "t-3"]


@pytest.mark.parametrize("ident", ['quote"d', "back\\slash\\", 'both\\"', "tab\tand\u00e9"])
async def test_an_id_that_json_escapes_is_found_in_the_list(
    aredis: aioredis.Redis, prefix: str, ident: str
) -> None:
    state = store(aredis, prefix)
    now = time.time()
    await state.append([turn(0, now - 1, ident=ident), turn(1, now)], {ident, "t-1"})
    report = await state.append([turn(0, now - 1, ident=ident)])
    assert dict(report.counts) == {("conv", "duplicate"): 1}
    assert await listed(aredis, state) == [ident, "t-1"]


async def test_a_turn_dropped_by_the_bounds_is_not_appended_again(
    aredis: aioredis.Redis, prefix: str
) -> None:
    state = store(aredis, prefix, max_turns=3)
    now = time.time()
    turns = [turn(i, now - 10 + i) for i in range(5)]
    await state.append(turns[:3], {"t-0", "t-1", "t-2"})
    assert b"mk" not in await meta(aredis, state)
    await state.append(turns[3:], {"t-3", "t-4"})  # the bounds bite: the middle turns go
    kept = await listed(aredis, state)
    assert len(kept) == 3 and kept[0] == "t-0" and kept[-1] == "t-4"
    dropped = next(t for t in turns if t.id not in kept)
    fields = await meta(aredis, state)
    assert fields[b"mk"] == b"1" and marks(fields) == {f"i:{t.id}".encode() for t in turns}
    report = await state.append([dropped])  # redelivered: its mark outlived its entry
    assert dict(report.counts) == {("conv", "duplicate"): 1}
    assert await listed(aredis, state) == kept


async def test_a_redelivered_turn_of_a_session_closed_past_grace_is_a_duplicate(
    aredis: aioredis.Redis, prefix: str
) -> None:
    state = store(aredis, prefix, grace=0.0)
    now = time.time()
    await state.append([turn(0, now - 100), turn(1, now - 99)], {"t-0", "t-1"})
    tag = state.keys.tag("conv", "k")
    [(due_tag, score)] = await state.due(time.time() + 3600, 10)
    claim = await state.claim(due_tag, score)
    assert not isinstance(claim, tuple), claim
    assert (await state.finish(claim, score, b"{}", "gap"))[0] == "closed"
    assert due_tag == tag
    report = await state.append([turn(1, now - 99), turn(2, now - 98)])
    assert dict(report.counts) == {("conv", "duplicate"): 1, ("conv", "late"): 1}


async def test_a_closing_lease_is_extended_only_by_its_holder(aredis: aioredis.Redis, prefix: str) -> None:
    state = store(aredis, prefix)
    other = SessionStore(aredis, state.terms, prefix=prefix, worker_id="other")
    now = time.time()
    await state.append([turn(0, now - 100)], {"t-0"})
    [(tag, score)] = await state.due(time.time() + 3600, 10)
    claim = await state.claim(tag, score)
    assert not isinstance(claim, tuple), claim
    lease = state.keys.keys(tag)[2]
    await aredis.pexpire(lease, 50)
    assert await state.renew(tag) is True
    assert 25_000 < await aredis.pttl(lease) <= 30_000
    assert await other.renew(tag) is False  # not its lease: left as it is
    assert (await state.finish(claim, score, b"{}", "gap"))[0] == "closed"
    assert await state.renew(tag) is False and await aredis.exists(lease) == 0  # finished: nothing to extend


def test_the_closer_keeps_each_turn_id_once_in_thread_order() -> None:
    turns: list[dict[str, Any]] = [{"id": "a", "n": 1}, {"id": "b"}, {"id": "a", "n": 2}, {"id": "c"}]
    assert once(turns) == [{"id": "a", "n": 1}, {"id": "b"}, {"id": "c"}]
    unique = [{"id": "a"}, {"id": "b"}]
    assert once(unique) is unique


class LostReply:
    """A session store whose first append lands in Redis but whose reply is lost (the worker retries)."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.calls: list[frozenset[str]] = []

    async def append(self, turns: Any, fresh: Any = frozenset()) -> Any:
        self.calls.append(frozenset(fresh))
        report = await self.inner.append(turns, fresh)
        if len(self.calls) == 1:
            raise StoreUnavailable("the reply was lost")
        return report


async def test_an_append_tried_again_after_a_lost_reply_looks_every_turn_up(
    aredis: aioredis.Redis, prefix: str
) -> None:
    text = """
suites:
  - {name: chat, default: true, evaluators: [{evaluator: exact_match}]}
sessions:
  - {name: conv, key: metadata.conversation_id, evaluators: [{evaluator: turn_scores}]}
"""
    _, suites = parse_config_text(text)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    results = ResultStore(aredis, prefix=prefix, windows=(60,))
    state = store(aredis, prefix)
    lossy = LostReply(state)
    processor = Processor(pipeline, results, steps=[AppendTurns(lossy)])  # type: ignore[arg-type]
    now = time.time()
    events = [
        {"id": f"e{i}", "model": "m", "input": "q", "output": "a", "expected": "a",
         "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 10 + i)),
         "metadata": {"conversation_id": "k"}}
        for i in range(3)
    ]  # fmt: skip
    await processor.process_batch([(orjson.dumps(e), Source("t", 0, i)) for i, e in enumerate(events)])
    assert lossy.calls == [frozenset({"e0", "e1", "e2"}), frozenset()]  # vouched for once, then looked up
    assert await listed(aredis, state) == ["e0", "e1", "e2"]  # appended once
    # the same batch redelivered: counted before, so looked up, and nothing is appended
    lossy.calls = [frozenset()]  # no more lost replies
    await processor.process_batch([(orjson.dumps(e), Source("t", 0, i)) for i, e in enumerate(events)])
    assert lossy.calls[1] == frozenset()
    assert await listed(aredis, state) == ["e0", "e1", "e2"]


async def test_an_agent_run_keeps_its_marks_from_its_first_turn(aredis: aioredis.Redis, prefix: str) -> None:
    state = SessionStore(
        aredis, {"conv": SessionTerms(60, 60, 500, 1 << 20, 0.0, marked=True)}, prefix=prefix
    )
    now = time.time()
    await state.append([turn(0, now - 2), turn(1, now - 1)], {"t-0", "t-1"})  # vouched for, all the same
    fields = await meta(aredis, state)
    assert fields[b"mk"] == b"1" and marks(fields) == {b"i:t-0", b"i:t-1"}
    report = await state.append([turn(1, now - 1), turn(2, now)], {"t-1", "t-2"})
    assert dict(report.counts) == {("conv", "duplicate"): 1, ("conv", "appended"): 1}
    assert await listed(aredis, state) == ["t-0", "t-1", "t-2"]


@pytest.mark.parametrize("ident", ["plain-1", 'q"uote\\d', "é\u2028"])
def test_every_kind_of_turn_starts_with_its_id_as_the_append_script_reads_it(ident: str) -> None:
    """The append script reads a listed turn's id off its entry: the JSON's first field."""
    from streameval.features.sessions.turns import step_turns, turns_of

    _, suites = parse_config_text(
        """
inputs: [{topic: spans, format: otlp_json}]
suites:
  - {name: chat, default: true, evaluators: [{evaluator: exact_match}]}
sessions:
  - {name: conv, key: metadata.k, evaluators: [{evaluator: turn_scores}]}
  - {name: run, key: metadata.trace_id, assemble: spans, evaluators: [{evaluator: turn_scores}]}
"""
    )
    pipeline = Pipeline(suites, annotators=annotators(suites))
    event = {
        "id": ident,
        "model": "m",
        "output": "a",
        "expected": "a",
        "metadata": {"k": "c", "trace_id": "t"},
    }
    outcome = pipeline.process_sync(orjson.dumps(event), Source(), time.time())
    assert outcome is not None and outcome.result is not None
    turns = list(turns_of(suites.sessions, pipeline.decode(orjson.dumps(event)), outcome.result))
    for kind in ("tool", "agent", "plan", "root"):
        step = {"id": ident, "t": 1.0, "kind": kind, "name": "x", "metadata": {"trace_id": "t"}}
        step["calls"] = [{"name": "f"}]
        turns += step_turns(suites.sessions, step, 1.0)
    assert len(turns) >= 5
    for t in turns:
        assert t.payload.startswith(b'{"id":' + orjson.dumps(t.id) + b","), t.payload[:60]
