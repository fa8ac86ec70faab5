"""Session state and closing on a real Redis server: turns appended once and in event-time order,
bounds, closing by end marker / gap / idle exactly once across closers, revisions that replace their
contribution to the aggregates, late turns after grace, and the offline twin giving the same results."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from jsonschema import Draft202012Validator

from streameval import schemas
from streameval.config import parse_config_text
from streameval.features.sessions.closer import SessionCloser
from streameval.features.sessions.local import LocalSessions
from streameval.features.sessions.state import SessionStore, session_terms
from streameval.features.sessions.step import AppendTurns
from streameval.features.sessions.turns import Turn, turns_in
from streameval.features.setup import annotators
from streameval.models import SessionResult, format_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline
from streameval.store import ResultStore

CONFIG = """
suites:
  - {name: chat, default: true, evaluators: [{evaluator: exact_match}]}
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    gap_s: {gap}
    grace_s: {grace}
    max_turns: {max_turns}
    evaluators: [{{evaluator: turn_scores}}, {{evaluator: thread_clean, weight: 0}}]
"""


class Rig:
    """A pipeline, the result store and the session state and closer on one Redis prefix."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        *,
        gap: float = 60,
        grace: float = 60,
        max_turns: int = 500,
        closers: int = 1,
        settle: float = 0.0,
    ) -> None:
        text = (
            CONFIG.replace("{gap}", str(gap))
            .replace("{grace}", str(grace))
            .replace("{max_turns}", str(max_turns))
        )
        text = text.replace("{{", "{").replace("}}", "}")
        _, self.suites = parse_config_text(text)
        self.pipeline = Pipeline(self.suites, annotators=annotators(self.suites))
        self.store = ResultStore(client, prefix=prefix, windows=(60,))
        terms = session_terms(self.suites.sessions, settle)
        self.states = [
            SessionStore(client, terms, prefix=prefix, lease_s=5, worker_id=f"w{i}") for i in range(closers)
        ]
        self.closers = [
            SessionCloser(s, self.store, self.pipeline, self.suites.sessions) for s in self.states
        ]
        self.sent: list[Publish] = []

    async def turns(self, *events: dict[str, Any]) -> list[Turn]:
        out: list[Turn] = []
        for event in events:
            outcome = await self.pipeline.process(orjson.dumps(event))
            assert outcome.result is not None, outcome.dead_letter
            out += turns_in(outcome.annotations)
        return out

    async def append(self, *events: dict[str, Any]) -> dict[tuple[str, str], int]:
        report = await self.states[0].append(await self.turns(*events))
        return dict(report.counts)

    async def send(self, message: Publish) -> None:
        self.sent.append(message)

    async def close(self, closer: int = 0) -> int:
        return await self.closers[closer].run_once(self.send)

    def results(self) -> list[SessionResult]:
        return [SessionResult.model_validate_json(m.value) for m in self.sent if m.kind == "session"]


def turn(
    i: int, at: float, *, conv: str = "c1", output: str = "Paris", last: bool = False, model: str = "m"
) -> dict[str, Any]:
    return {
        "id": f"{conv}-{i}",
        "model": model,
        "input": f"question {i}",
        "output": output,
        "expected": "Paris",
        "timestamp": format_time(at),
        "metadata": {"conversation_id": conv, "last": last},
    }


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


async def test_turns_are_appended_once_in_event_time_order_and_an_end_marker_closes(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix)
    now = await redis_now(aredis)
    counts = await rig.append(turn(2, now - 1), turn(0, now - 3))
    assert counts == {("conv", "appended"): 2}
    assert await rig.append(turn(0, now - 3), turn(1, now - 2)) == {
        ("conv", "duplicate"): 1,
        ("conv", "appended"): 1,
    }
    assert await rig.close() == 0  # not due: gap 60 s
    await rig.append(turn(3, now, last=True))
    assert await rig.close() == 1
    [result] = rig.results()
    assert result.turn_ids == ["c1-0", "c1-1", "c1-2", "c1-3"]
    assert (result.closed_by, result.revision, result.truncated, result.metrics.turns) == ("end", 0, False, 4)
    assert await rig.close() == 0  # closed: nothing more
    [figures] = await rig.store.all_time()
    assert (figures.model, figures.suite, figures.count) == ("m", "conv", 1)


async def test_bounds_drop_middle_turns_the_same_way_online_and_offline(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix, max_turns=4)
    now = await redis_now(aredis)
    events = [turn(i, now - 100 + i, last=i == 9) for i in (0, 5, 1, 9, 2, 8, 3, 7, 4, 6)]
    turns = await rig.turns(*events)
    for t in turns:  # one by one, as separate batches
        await rig.states[0].append([t])
    assert await rig.close() == 1
    [online] = rig.results()
    local = LocalSessions(rig.suites.sessions)
    local.add(turns)
    [(_, offline)] = await local.close_all(rig.pipeline)
    assert online.truncated and online.metrics.dropped == 6 and online.metrics.kept == 4
    assert online.turn_ids[0] == "c1-0" and online.turn_ids[-1] == "c1-9"
    assert online.turn_ids == offline.turn_ids
    skip = {"closed_at", "evaluated_at", "latency_ms"}
    assert online.model_dump(exclude=skip) == offline.model_dump(exclude=skip)


async def test_gap_closes_sessions_whose_event_times_passed_and_idle_closes_quiet_ones(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix, gap=1.5, settle=0.5)
    now = await redis_now(aredis)
    await rig.append(turn(0, now - 10, conv="past"), turn(1, now - 9, conv="past"))
    await rig.append(turn(0, now + 3600, conv="future"))  # a producer clock an hour ahead
    assert await rig.close() == 0  # event time passed long ago, but turns of that moment may still be coming
    await asyncio.sleep(0.6)
    assert await rig.close() == 1
    assert [(r.key, r.closed_by) for r in rig.results()] == [("past", "gap")]
    started = time.monotonic()
    while not await rig.close():
        await asyncio.sleep(0.1)
    assert time.monotonic() - started < 1.5 + 1
    assert [(r.key, r.closed_by) for r in rig.results()] == [("past", "gap"), ("future", "idle")]


async def test_concurrent_closers_publish_each_session_once(aredis: aioredis.Redis, prefix: str) -> None:
    rig = Rig(aredis, prefix, closers=3)
    now = await redis_now(aredis)
    events = [turn(i, now - 50 + i, conv=f"k{c}", last=i == 2) for c in range(40) for i in range(3)]
    await rig.states[0].append(await rig.turns(*events))
    published = await asyncio.gather(*(rig.close(i) for i in range(3)))
    assert sum(published) == 40
    assert sorted(r.key for r in rig.results()) == sorted(f"k{c}" for c in range(40))
    [figures] = await rig.store.all_time()
    assert figures.count == 40


async def test_a_late_turn_within_grace_revises_and_replaces_the_aggregates(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix, gap=1, grace=30)
    now = await redis_now(aredis)
    await rig.append(turn(0, now - 5), turn(1, now - 4, output="Rome", last=True))
    assert await rig.close() == 1
    first = rig.results()[0]
    assert first.score == pytest.approx(0.5)
    counts = await rig.append(turn(2, now - 3))  # after the end marker, within grace
    assert counts == {("conv", "revised"): 1}
    assert await rig.close() == 1
    revised = rig.results()[1]
    assert (revised.revision, revised.turn_ids) == (1, ["c1-0", "c1-1", "c1-2"])
    assert revised.score == pytest.approx(2 / 3)
    [figures] = await rig.store.all_time()
    assert figures.count == 1  # the revision replaced the first result's contribution
    assert figures.mean == pytest.approx(2 / 3)
    assert figures.fields["ev:turn_scores:count"] == 1
    # a redelivered revision is not counted again
    assert await rig.append(turn(2, now - 3)) == {("conv", "duplicate"): 1}


async def test_a_turn_after_grace_is_late_and_not_appended(aredis: aioredis.Redis, prefix: str) -> None:
    rig = Rig(aredis, prefix, gap=1, grace=0.5)
    now = await redis_now(aredis)
    await rig.append(turn(0, now - 5, last=True))
    assert await rig.close() == 1
    await asyncio.sleep(0.7)
    assert await rig.append(turn(1, now - 4)) == {("conv", "late"): 1}
    assert await rig.close() == 0
    assert len(rig.results()) == 1


async def test_keyless_turns_are_not_appended(aredis: aioredis.Redis, prefix: str) -> None:
    rig = Rig(aredis, prefix)
    event = turn(0, time.time())
    del event["metadata"]["conversation_id"]
    turns = await rig.turns(event)
    assert [(t.session, t.key) for t in turns] == [("conv", None)]
    assert (await rig.states[0].append(turns)).counts == {}


async def test_the_worker_appends_turns_after_recording_and_counts_late_and_keyless_ones(
    aredis: aioredis.Redis, prefix: str
) -> None:
    from prometheus_client import REGISTRY

    from streameval.pipeline import Source
    from streameval.processor import Processor

    rig = Rig(aredis, prefix, gap=1, grace=0.3)
    processor = Processor(rig.pipeline, rig.store, steps=[AppendTurns(rig.states[0])])

    def count(outcome: str) -> float:
        return (
            REGISTRY.get_sample_value(
                "streameval_session_turns_total", {"session": "conv", "outcome": outcome}
            )
            or 0.0
        )

    before = {k: count(k) for k in ("appended", "late", "keyless", "duplicate")}
    now = await redis_now(aredis)
    keyless = turn(9, now)
    del keyless["metadata"]["conversation_id"]
    batch = [
        (orjson.dumps(e), Source("t", 0, i)) for i, e in enumerate([turn(0, now - 5, last=True), keyless])
    ]
    published = await processor.process_batch(batch)
    assert [m.kind for m in published] == ["result", "result"]  # every turn is still an event of its suite
    assert await rig.close() == 1
    await asyncio.sleep(0.4)  # past grace
    await processor.process_batch([(orjson.dumps(turn(1, now - 4)), Source("t", 0, 5))])
    await processor.process_batch(batch[:1])  # redelivered
    after = {k: count(k) - before[k] for k in before}
    assert after == {"appended": 1, "late": 1, "keyless": 1, "duplicate": 1}


async def test_the_judge_panel_reads_the_whole_thread_blind_over_http(
    aredis: aioredis.Redis, prefix: str
) -> None:
    from streameval.judges.sim import start_judge_sim

    received: list[dict[str, Any]] = []
    async with start_judge_sim(requests=received) as url:
        text = f"""
judges:
  - {{name: sim, protocol: openai, base_url: '{url}/v1', model: simulated, weight: 1}}
suites:
  - {{name: chat, default: true, evaluators: [{{evaluator: exact_match}}]}}
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    evaluators: [{{evaluator: turn_scores}}]
    judge: {{consistency_rate: 0}}
"""
        _, suites = parse_config_text(text)
        pipeline = Pipeline(suites, annotators=annotators(suites))
        await pipeline.start()
        try:
            store = ResultStore(aredis, prefix=prefix, windows=(60,))
            state = SessionStore(aredis, session_terms(suites.sessions, 0.0), prefix=prefix)
            closer = SessionCloser(state, store, pipeline, suites.sessions)
            now = await redis_now(aredis)
            turns = []
            for i, said in enumerate(["My name is Ada.", "What is my name?"]):
                event = {
                    **turn(i, now - 9 + i, last=i == 1, model="secret-model-x"),
                    "input": said,
                    "output": f"reply {i}: Ada" if i else "Hello Ada.",
                }
                turns += turns_in((await pipeline.process(orjson.dumps(event))).annotations)
            await state.append(turns)
            sent: list[Publish] = []

            async def send(message: Publish) -> None:
                sent.append(message)

            assert await closer.run_once(send) == 1
        finally:
            await pipeline.close()
    [result] = [SessionResult.model_validate_json(m.value) for m in sent]
    assert result.judge is not None and result.judge.status == "ok" and result.judge.category == "multi_turn"
    [body] = received
    prompt = orjson.dumps(body).decode()
    for text_seen in (
        "My name is Ada.",
        "Hello Ada.",
        "What is my name?",
        "reply 1: Ada",
        "context_retention",
    ):
        assert text_seen in prompt
    assert "secret-model-x" not in prompt  # blind


async def test_one_call_with_a_turn_twice_and_bounds_biting_appends_as_turn_by_turn(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix, max_turns=4)
    now = await redis_now(aredis)
    events = [turn(i, now - 100 + i, last=i == 9) for i in (0, 5, 1, 9, 2, 8, 3, 7, 4, 6)]
    turns = await rig.turns(*events)
    report = await rig.states[0].append([*turns, turns[2]])  # one call; the third turn comes twice
    assert dict(report.counts) == {("conv", "appended"): 10, ("conv", "duplicate"): 1}
    assert await rig.close() == 1
    [online] = rig.results()
    local = LocalSessions(rig.suites.sessions)
    local.add(turns)
    [(_, offline)] = await local.close_all(rig.pipeline)
    assert online.metrics.dropped == 6 and online.turn_ids == offline.turn_ids
    assert online.turn_ids[0] == "c1-0" and online.turn_ids[-1] == "c1-9"


async def test_sessions_spread_over_the_configured_shards_and_stray_index_entries_are_dropped(
    aredis: aioredis.Redis, prefix: str
) -> None:
    _, suites = parse_config_text(
        CONFIG.replace("{gap}", "60")
        .replace("{grace}", "60")
        .replace("{max_turns}", "500")
        .replace("{{", "{")
        .replace("}}", "}")
    )
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    state = SessionStore(aredis, session_terms(suites.sessions, 0.0), prefix=prefix, shards=3)
    closer = SessionCloser(state, store, pipeline, suites.sessions)
    now = await redis_now(aredis)
    turns = []
    for c in range(12):
        for i in range(2):
            outcome = await pipeline.process(orjson.dumps(turn(i, now - 20 + i, conv=f"s{c}", last=i == 1)))
            turns += turns_in(outcome.annotations)
    assert dict((await state.append(turns)).counts) == {("conv", "appended"): 24}
    sizes = [await aredis.zcard(state.keys.due(shard)) for shard in range(3)]
    assert sum(sizes) == 12 and all(sizes)  # every shard holds some
    assert not await aredis.exists(state.keys.due(3))
    # an entry another shard count left in a shard that is not its own: dropped, never claimed
    stray = next(t for t in (state.keys.tag("conv", f"x{i}") for i in range(20)) if state.keys.shard(t) != 0)
    await aredis.zadd(state.keys.due(0), {stray: int((now - 30) * 1000)})  # deadlines in ms
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)

    assert await closer.run_once(send) == 12
    assert sorted(SessionResult.model_validate_json(m.value).key for m in sent) == sorted(
        f"s{c}" for c in range(12)
    )
    assert await aredis.zscore(state.keys.due(0), stray) is None
    assert [await aredis.zcard(state.keys.due(shard)) for shard in range(3)] == [0, 0, 0]


async def test_a_batch_larger_than_one_call_is_split_and_appends_the_same(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streameval.features.sessions import state as state_module

    monkeypatch.setattr(state_module, "_MAX_CALL_TURNS", 4)  # calls of at most 4 turns
    rig = Rig(aredis, prefix, max_turns=6)
    now = await redis_now(aredis)
    events = [turn(i, now - 100 + i, last=i == 9) for i in (0, 5, 1, 9, 2, 8, 3, 7, 4, 6)]
    events += [turn(i, now - 50 + i, conv="c2", last=i == 2) for i in range(3)]
    turns = await rig.turns(*events)
    report = await rig.states[0].append([*turns, turns[0]])
    assert dict(report.counts) == {("conv", "appended"): 13, ("conv", "duplicate"): 1}
    assert await rig.close() == 2
    online = {r.key: r for r in rig.results()}
    local = LocalSessions(rig.suites.sessions)
    local.add(turns)
    offline = {r.key: r for _, r in await local.close_all(rig.pipeline)}
    assert online["c1"].metrics.dropped == 4 and online["c1"].turn_ids == offline["c1"].turn_ids
    assert online["c2"].turn_ids == ["c2-0", "c2-1", "c2-2"]


async def test_a_closing_longer_than_its_bound_is_given_up_and_closed_by_a_later_claim(
    aredis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from streameval.judges.sim import start_judge_sim

    async with start_judge_sim(latency_ms=1000) as url:
        text = f"""
judges:
  - {{name: sim, protocol: openai, base_url: '{url}/v1', model: simulated, weight: 1}}
suites:
  - {{name: chat, default: true, evaluators: [{{evaluator: exact_match}}]}}
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    evaluators: [{{evaluator: turn_scores}}]
    judge: {{consistency_rate: 0}}
"""
        _, suites = parse_config_text(text)
        pipeline = Pipeline(suites, annotators=annotators(suites))
        await pipeline.start()
        try:
            store = ResultStore(aredis, prefix=prefix, windows=(60,))
            state = SessionStore(aredis, session_terms(suites.sessions, 0.0), prefix=prefix, lease_s=0.5)
            now = await redis_now(aredis)
            turns = []
            for i in range(2):
                turns += turns_in(
                    (await pipeline.process(orjson.dumps(turn(i, now - 9 + i, last=i == 1)))).annotations
                )
            await state.append(turns)
            sent: list[Publish] = []

            async def send(message: Publish) -> None:
                sent.append(message)

            hasty = SessionCloser(state, store, pipeline, suites.sessions, max_close_s=0.3)
            assert await hasty.run_once(send) == 0 and sent == []
            assert "took longer than 0.3 s; given up" in caplog.text
            lease = state.keys.keys(state.keys.tag("conv", "c1"))[2]
            for _ in range(200):  # its lease, no longer kept, runs out (0.5 s)
                if not await aredis.exists(lease):
                    break
                await asyncio.sleep(0.05)
            closer = SessionCloser(state, store, pipeline, suites.sessions)
            assert await closer.run_once(send) == 1
        finally:
            await pipeline.close()
    [result] = [SessionResult.model_validate_json(m.value) for m in sent]
    assert result.judge is not None and result.judge.status == "ok" and len(result.turn_ids) == 2


async def test_a_published_session_result_names_its_version_and_its_figures_are_under_it(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rig = Rig(aredis, prefix)
    [session] = rig.suites.sessions
    now = await redis_now(aredis)
    await rig.append(turn(0, now - 2), turn(1, now - 1, last=True))
    assert await rig.close() == 1
    [message] = [m for m in rig.sent if m.kind == "session"]
    document = orjson.loads(message.value)
    assert document["suite_version"] == session.suite.version and len(session.suite.version) == 12
    assert "backfill" not in document  # absent unless a backfill judged it
    errors = [e.message for e in Draft202012Validator(schemas.load("session")).iter_errors(document)]
    assert not errors
    pairs = await rig.store.pairs()
    assert ("m", "conv", session.suite.version) in pairs
