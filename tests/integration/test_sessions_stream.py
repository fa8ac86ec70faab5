"""Sessions with two worker processes on the real broker (Tansu) and Redis.

Turns of each conversation are keyed by their turn number, so they land on both partitions and both workers.
Each conversation closes once: on its end marker, on the clock passing its last event time + gap_s
(past timestamps), or gap_s after its last turn arrived when its event times are ahead of the clock
(idle); a turn after the end marker within grace_s publishes revision 1, whose figures replace revision
0's. The same turns evaluated offline (``streameval evaluate``) give the same session results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config_text
from streameval.embedded import EmbeddedBroker
from streameval.features.setup import annotators
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.models import SessionResult, format_time
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline
from streameval.store import ResultStore

from ._topics import read_all

pytestmark = pytest.mark.integration

GAP = 2.0
CONFIG = f"""
windowing: {{close_interval_s: 0.2}}
suites:
  - name: chat
    default: true
    evaluators: [{{evaluator: exact_match}}]
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    gap_s: {GAP}
    grace_s: 30
    evaluators:
      - {{evaluator: turn_scores}}
      - {{evaluator: thread_clean, weight: 0}}
      - {{evaluator: collaboration_efficiency, weight: 0}}
      - {{evaluator: adaptability, weight: 0}}
"""


def turn(conv: str, i: int, at: float, *, last: bool = False, output: str | None = None) -> bytes:
    event = {
        "id": f"{conv}-{i}",
        "model": "m1",
        "input": f"q{i}",
        "output": output or ("Paris" if i % 3 else "Rome"),
        "expected": "Paris",
        "timestamp": format_time(at),
        "category": "qa_simple",
        "metadata": {"conversation_id": conv, "last": last, "domain": "geo" if i % 2 else "history"},
    }
    return orjson.dumps(event)


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


def by_turn(value: bytes) -> bytes:
    """Kafka key by turn number: turns 0-2 and 7 go to one partition, 3-6 to the other (murmur2)."""
    return f"turn-{orjson.loads(value)['id'].rsplit('-', 1)[1]}".encode()


async def test_two_workers_close_each_conversation_once_and_revise_on_a_late_turn(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    workers = [start_worker(config, app_id="sessions") for _ in range(2)]
    now = await redis_now(aredis)
    await produce(broker.bootstrap, topics["requests"], [b'{"id": "warm", "model": "w", "output": "x"}'])
    await collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 1, timeout=90)

    now = await redis_now(aredis)
    ended = [turn("ended", i, now - 30 + i, last=i == 5) for i in range(6)]
    # out of order within the conversation
    gap = [turn("gap", i, now - 60 + i) for i in (3, 0, 4, 1, 2, 6, 5)]
    idle = [turn("idle", i, now + 3600 + i) for i in range(4)]  # a producer clock an hour ahead
    revised = [turn("revised", i, now - 20 + i, last=i == 3) for i in range(4)]
    first = [*ended, *gap, *idle, *revised]

    def closed(n: int) -> Callable[[list[Record]], bool]:
        return lambda records: len(records) >= n

    await produce(broker.bootstrap, topics["requests"], first, key=by_turn)
    requests = await collect(broker.bootstrap, [topics["requests"]], until=closed(1 + len(first)), timeout=30)
    for conv in (
        "ended",
        "gap",
        "revised",
    ):  # each conversation's turns sit on both partitions (both workers)
        assert {r.partition for r in requests if orjson.loads(r.value)["id"].startswith(conv)} == {0, 1}

    records = await collect(broker.bootstrap, [topics["sessions"]], until=closed(4), timeout=60)
    # a turn of "revised" after its end marker, within grace: revision 1
    late = turn("revised", 4, now - 15, output="Paris")
    await produce(broker.bootstrap, topics["requests"], [late], key=by_turn)
    await collect(broker.bootstrap, [topics["sessions"]], until=closed(5), timeout=60)
    records = await read_all(broker.bootstrap, [topics["sessions"]])
    for worker in workers:
        assert worker.proc.poll() is None, worker.log()[-3000:]
    results = [SessionResult.model_validate_json(r.value) for r in records]
    assert Counter((r.key, r.revision) for r in results) == {
        ("ended", 0): 1,
        ("gap", 0): 1,
        ("idle", 0): 1,
        ("revised", 0): 1,
        ("revised", 1): 1,
    }
    latest = {r.key: r for r in results if r.revision == max(x.revision for x in results if x.key == r.key)}
    assert {k: r.closed_by for k, r in latest.items()} == {
        "ended": "end",
        "gap": "gap",
        "idle": "idle",
        "revised": "end",
    }
    assert latest["gap"].turn_ids == [f"gap-{i}" for i in range(7)]  # event-time order
    assert latest["revised"].turn_ids == [f"revised-{i}" for i in range(5)]
    assert latest["ended"].metrics.turns == 6 and latest["ended"].metrics.duration_s == 5.0

    # figures per model x session name: one per conversation, the revision replacing revision 0
    store = ResultStore(aredis, prefix=prefix)
    figures = {(a.model, a.suite): a for a in await store.all_time()}
    conv = figures[("m1", "conv")]
    assert conv.count == 4
    assert conv.mean == pytest.approx(sum(r.score for r in latest.values()) / 4)

    # offline parity: the same turns in a file give the same session results (timing fields aside)
    lines = tmp_path / "turns.jsonl"
    lines.write_bytes(b"\n".join([*first, late]))
    _, suites = parse_config_text(CONFIG)
    out = tmp_path / "sessions.jsonl"
    await evaluate_file(
        Pipeline(suites, annotators=annotators(suites)),
        lines,
        tmp_path / "r.jsonl",
        tmp_path / "d.jsonl",
        sessions_path=out,
    )
    offline = {
        r.key: r for r in (SessionResult.model_validate_json(x) for x in out.read_bytes().splitlines())
    }
    skip = {"closed_at", "evaluated_at", "latency_ms"}
    for key in ("ended", "gap"):
        assert offline[key].model_dump(exclude=skip) == latest[key].model_dump(exclude=skip)
    # offline closes at the end of the file: "revised" has its late turn in revision 0, "idle" closes by gap
    assert offline["revised"].model_dump(exclude=skip | {"id", "revision"}) == latest["revised"].model_dump(
        exclude=skip | {"id", "revision"}
    )
    assert offline["idle"].closed_by == "gap" and offline["idle"].turn_ids == latest["idle"].turn_ids
