"""Sessions without Redis, for ``streameval evaluate`` on a file: the same turns, order, bounds and
thread judging as the stream worker's (streameval.features.sessions.state, .closer), every session closed at the
end of the file (``closed_by``: ``end`` when a turn carried the end marker, else ``gap``: the end of the
input is the end of event time).

The same input gives the same session results online and offline (closing times and latencies aside)
when each session's turns are not dropped by its bounds in a different arrival order.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from ...config import Session
from ...models import GradedResult, SessionResult
from ...pipeline import Pipeline
from .closer import evaluate_thread, judged
from .turns import Turn

__all__ = ["LocalSessions"]

_PREFIX = 30  # event time and arrival number in front of each stored turn (bytes are counted the same way)


@dataclass
class _State:
    order: list[tuple[float, int]] = field(default_factory=list)
    payloads: dict[tuple[float, int], bytes] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    seq: int = 0
    bytes: int = 0
    ended: bool = False


class LocalSessions:
    """Turns kept in memory, closed at the end of the input."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self.sessions = {s.name: s for s in sessions}
        self._open: dict[tuple[str, str], _State] = {}
        self.keyless: dict[str, int] = {}

    def add(self, turns: Sequence[Turn]) -> None:
        for turn in turns:
            if turn.key is None:
                self.keyless[turn.session] = self.keyless.get(turn.session, 0) + 1
                continue
            config = self.sessions[turn.session].config
            state = self._open.setdefault((turn.session, turn.key), _State())
            if turn.id in state.ids:
                continue
            state.ids.add(turn.id)
            state.seq += 1
            slot = (turn.time, state.seq)
            bisect.insort(state.order, slot)
            state.payloads[slot] = turn.payload
            state.bytes += _PREFIX + len(turn.payload)
            state.ended = state.ended or turn.end
            while (len(state.order) > config.max_turns or state.bytes > config.max_bytes) and len(
                state.order
            ) > 2:
                gone = state.order.pop(len(state.order) // 2)
                state.bytes -= _PREFIX + len(state.payloads.pop(gone))

    async def close_all(self, pipeline: Pipeline) -> list[tuple[GradedResult, SessionResult]]:
        """Judge every session (in order of session name, then first event time, then key): the graded form
        (what the worker records; the summary counts it as pair model x session name) and the result."""
        return [(graded, result) for graded, result, _ in await self.judge_all(pipeline)]

    async def judge_all(
        self, pipeline: Pipeline
    ) -> list[tuple[GradedResult, SessionResult, dict[str, dict[str, float]]]]:
        """:meth:`close_all`, each with its counters too (what the store records with it: a backfill)."""
        out = []
        ordered = sorted(self._open.items(), key=lambda item: (item[0][0], item[1].order[0][0], item[0][1]))
        for (name, key), state in ordered:
            turns = [orjson.loads(state.payloads[slot]) for slot in state.order]
            if not judged(turns):  # an agent run of steps only: closes without a result, as online
                continue
            now = time.time()
            graded, result, counters = await evaluate_thread(
                pipeline,
                self.sessions[name],
                key,
                0,
                turns,
                state.seq,
                "end" if state.ended else "gap",
                now,
                received_at=now,
            )
            out.append((graded, result, counters))
        self._open.clear()
        return out
