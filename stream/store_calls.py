"""The script calls of a recorded batch besides the pairs' record calls, and the wait for replicas
(streameval.store builds them with its figures): the windows' index, the dead letters' counts.

Both are built before anything is sent and go in the batch's one pipeline (streameval.keyspace.run_scripts).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import StoreUnavailable
from .feature import Call
from .keyspace import Client, Keys, guard, is_cluster

__all__ = ["CLOCK_MARGIN_S", "dead_letter_call", "index_call", "until", "wait_replicated"]

#: how far (s) the worker's guess of the Redis clock may be off before the script asks again
CLOCK_MARGIN_S = 2.0


def until(moment: float, now: float) -> int:
    """Seconds from ``now`` to ``moment`` (our clock, so an injected clock gives consistent TTLs)."""
    return max(1, math.ceil(moment - now))


def index_call(
    script: Any,
    keys: Keys,
    windows: Sequence[int],
    event_times: Mapping[str, Sequence[float]],
    now: float,
    *,
    allowed_lateness_s: float,
    window_ttl_s: int,
    all_time_ttl_s: int,
    candidates: Callable[[int, float], tuple[int, int]],
    unpublished: str | None = None,
) -> Call:
    """Pairs (with their events' times) into each window's index before their data: the closer reads the
    index, then the data. ``unpublished``: the prefix of the unpublished windows' zsets instead of the
    closer's (a backfill's windows are indexed for the API, not handed to the closer)."""
    index: dict[tuple[int, int], set[str]] = defaultdict(set)
    for pair, times in event_times.items():
        for event_time in times:
            for s, size in enumerate(windows):
                start = int(event_time // size) * size
                if start + size + allowed_lateness_s > now - CLOCK_MARGIN_S:  # else surely redirected
                    index[(s, start)].add(pair)
                if start + size <= now + CLOCK_MARGIN_S:  # late: it may be counted in the open window
                    for candidate in set(candidates(size, now)):
                        index[(s, candidate)].add(pair)
    klist = [keys.window_pairs(windows[s], start) for s, start in index]
    for size in windows:
        klist += [
            keys.open_windows(size) if unpublished is None else f"{unpublished}{size}",
            keys.windows(size),
        ]
    klist.append(keys.pairs)
    args: list[Any] = [
        len(index),
        len(windows),
        window_ttl_s,
        int(now - window_ttl_s),
        repr(now),
        all_time_ttl_s,
    ]
    for (s, start), members in index.items():
        args += [s + 1, start, len(members), *sorted(members)]
    return script, klist, args


def dead_letter_call(
    script: Any,
    keys: Keys,
    windows: Sequence[int],
    dead_letters: Sequence[tuple[str, str, float]],
    now: float,
    *,
    seen_ttl_s: int,
    window_ttl_s: int,
    all_time_ttl_s: int,
) -> Call:
    """Count each dead letter ``(kind, topic:partition:offset, event time)`` once per source position."""
    generation = int(now // seen_ttl_s)
    window_keys: dict[str, int] = {}
    seen_keys: dict[str, int] = {}
    per_letter: list[Any] = []
    for kind, source_key, event_time in dead_letters:
        rest, _, offset = source_key.rpartition(":")
        topic, _, partition = rest.rpartition(":")
        seen = seen_keys.setdefault(keys.dead_letter_seen(generation, topic, partition), len(seen_keys) + 1)
        previous = seen_keys.setdefault(
            keys.dead_letter_seen(generation - 1, topic, partition), len(seen_keys) + 1
        )
        per_letter += [kind, seen, previous, offset]
        for size in windows:
            start = int(event_time // size) * size
            per_letter += [
                window_keys.setdefault(keys.dead_letters(size, start), len(window_keys) + 1),
                start,
            ]
    klist = [
        keys.dead_letters_all,
        *window_keys,
        *seen_keys,
        *(keys.dead_letter_windows(s) for s in windows),
    ]
    args = [
        len(window_keys),
        len(seen_keys),
        len(windows),
        window_ttl_s,
        until((generation + 2) * seen_ttl_s + 60, now),
        int(now - window_ttl_s),
        all_time_ttl_s,
        *per_letter,
    ]
    return script, klist, args


async def wait_replicated(client: Client, replicas: int, timeout_ms: int, tags: list[str]) -> None:
    """Return once ``replicas`` replicas of each node written to hold every write made so far.

    Per node one write (a short-lived ``sync`` key in a slot it serves) and WAIT on the same connection:
    the replication stream is ordered, so replicas that have that write have every earlier one, also
    those of an earlier attempt at this batch. Fewer replicas within the timeout: StoreUnavailable
    (the worker retries the batch, which finds its events marked; nothing is published before).
    """
    sync_keys = list(dict.fromkeys(tag + "sync" for tag in tags))

    async def wait() -> list[int]:
        async with client.pipeline(transaction=False) as pipe:
            if is_cluster(client):
                nodes: dict[str, str] = {}
                for key in sync_keys:
                    nodes.setdefault(client.get_node_from_key(key).name, key)  # type: ignore[union-attr]
                for name, key in nodes.items():
                    pipe.set(key, 1, ex=60)
                    pipe.execute_command(
                        "WAIT",
                        replicas,
                        timeout_ms,
                        target_nodes=client.get_node(node_name=name),  # type: ignore[union-attr]
                    )
            else:
                pipe.set(sync_keys[0], 1, ex=60)
                pipe.execute_command("WAIT", replicas, timeout_ms)
            return [int(r) for r in (await pipe.execute())[1::2]]

    acked = await guard(wait())
    if min(acked) < replicas:
        raise StoreUnavailable(
            f"only {min(acked)} of STREAMEVAL_REDIS_WAIT_REPLICAS={replicas} replicas acknowledged "
            f"a batch's writes within {timeout_ms} ms"
        )
