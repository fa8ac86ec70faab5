"""Session state in Redis, shared by every worker: the turns, the session's figures, its closing lease
and the sharded index of close deadlines. No keyspace SCAN anywhere.

``P`` is the prefix (``STREAMEVAL_REDIS_PREFIX``). A session is named ``ss:{name}:{key}`` (each
URL-quoted: its tag ``T`` below) and lives in shard N, 0 <= N < ``STREAMEVAL_SESSION_SHARDS`` (6), by
CRC-32 of that name: every key of a session and its shard's due index carry the hash tag ``{sx:N}``, so
one script call per shard and batch appends every turn of the batch that falls in that shard and sets
their index entries (Redis Cluster: each script touches one slot):

================================  ===================================================================
``P{sx:N}:turns:T``               list of turns in arrival order, each: event time (``%020.6f``) + the
                                  turn (JSON, streameval.features.sessions.turns); sorted stably by the 20
                                  characters they are in event-time order, then arrival
``P{sx:N}:meta:T``                hash: ``state`` (open, closing, closed); ``v``, the figures packed in
                                  64 bytes (:data:`META_FIELDS`, :data:`META_FORMAT`: first / last event
                                  time, expires, deadline, arrival (Redis clock of the last turn), kept,
                                  bytes, end, seq, n (turns received), dropped); rev (next revision), prev
                                  (the last published result), closed_at, closed_by; in a marked session
                                  ``mk`` and ``i:{turn id}`` per turn (a redelivered turn is appended
                                  once: streameval.features.sessions.scripts, APPEND)
``P{sx:N}:lease:T``               the closing lease (``SET NX PX``)
``P{sx:N}:due``                   zset of the shard's sessions to close: member = ``T``, score = its
                                  close deadline (Redis clock) in whole milliseconds: integers (a small
                                  zset, a listpack, compares them without parsing text); the claim reads
                                  the exact deadline in the meta
================================  ===================================================================

Deadline: ``min(last event time, arrival) + gap_s``, but never sooner than ``settle_s`` after the last
arrival (the suite file's ``windowing.allowed_lateness_s``, 5 s by default: turns of the same moment may
still be on their way through other partitions and workers); ``settle_s`` after the arrival of a turn
that carries the end marker. With event times close to the clock the first term closes the session (``closed_by: gap``:
the clock, the watermark windows use too, passed the last event time + gap_s); when the event times
are ahead of the clock (a producer's clock, future timestamps), a quiet session still closes gap_s
after its last turn arrived (``idle``). Deadlines only grow, except when a session starts, reopens or
meets its end marker: only those appends set the session's index entry (``ZADD``); otherwise the entry
stays early and the closer's claim, which re-reads the deadline in the meta, moves it once (only if it
still holds the score it read), so an early entry costs one look, never an early close. The append
script sets the entry itself, in the same call as the turns (no second round trip, and no two workers'
entries landing out of order).

An index entry whose member belongs to another shard (left by another shard count) is dropped when the
closer reads it; that state is not read (it expires).

Lifetime: an open session's keys expire ``gap_s + grace_s + 1 h`` after its last turn (a safety net:
the closer closes it long before); once closed, its turns stay ``grace_s`` (+1 min) for late turns to
revise it, its meta ``grace_s`` + :data:`TOMBSTONE_S` to tell a late turn from a new session.
"""

from __future__ import annotations

import math
import re
import struct
import zlib
from collections import defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from orjson import dumps as _dumps

from ...redis_client import Client, guard, run_scripts
from . import scripts
from .turns import Turn

__all__ = [
    "DUE_SHARDS",
    "LEGACY_SHARDS",
    "META_FIELDS",
    "META_FORMAT",
    "TOMBSTONE_S",
    "AppendReport",
    "Claim",
    "SessionKeys",
    "SessionStore",
    "SessionTerms",
    "session_terms",
]

#: the figures packed in a session meta's ``v`` field (64 bytes, ``struct`` format :data:`META_FORMAT`)
META_FIELDS = (
    "first",
    "last",
    "expires",
    "deadline",
    "arrival",
    "kept",
    "bytes",
    "end",
    "seq",
    "n",
    "dropped",
)
META_FORMAT = "<5d6I"
#: shards the sessions are spread over by default (``STREAMEVAL_SESSION_SHARDS``): one append call per
#: shard and batch; on the smallest Redis Cluster (3 masters) the six tags fall two on each master
DUE_SHARDS = 6
#: the shards of the earlier layout's due index (one tag per session, 16 index shards)
LEGACY_SHARDS = 16
#: how long a closed session's meta outlives its grace (a turn of it after grace is late, not a new session)
TOMBSTONE_S = 86400
_OPEN_MARGIN_S = 3600
_TIME = 20  # the event time in front of each turn entry (``%020.6f``)
# a session in an append call: its turns' least and greatest time, terms, n, flags (1 end marker, 2 an id
# twice), the bytes they count toward max_bytes
_SESSION = struct.Struct("<ddHIBI")
_LENGTH = struct.Struct("<I")
_MAX_CALL_TURNS = 1024  # turns of one append script call at most (a larger batch takes more calls per shard)
_OUTCOMES = {48: "duplicate", 49: "appended", 50: "late", 51: "revised"}  # the script's '0' .. '3' per turn


_NAMES: dict[str, str] = {}  # a session name's tag prefix, ``ss:{quoted name}:``
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch  # what quote(safe="") leaves as it is


class _ShardCall:
    """The append script call of one shard: its keys, term sets and arguments, and the turns in order."""

    __slots__ = ("entries", "groups", "keys", "parts", "size", "term_args", "terms")

    def __init__(self, due: str) -> None:
        self.keys: list[str] = [due]
        self.terms: dict[str, int] = {}
        self.term_args: list[Any] = []
        self.parts: list[bytes] = []
        self.entries: list[bytes] = []
        self.groups: list[tuple[str, int]] = []  # each session's name and turns, in call order
        self.size = 0


class SessionKeys:
    """Key names of sessions under one prefix, over ``shards`` hash tags (module docstring)."""

    def __init__(self, prefix: str, shards: int = DUE_SHARDS) -> None:
        self.prefix = prefix
        self.shards = shards

    @staticmethod
    def tag(session: str, key: str) -> str:
        """The session's name in its shard: ``ss:{name}:{key}`` (each URL-quoted), its due-index member."""
        name = _NAMES.get(session)
        if name is None:
            if len(_NAMES) >= 1024:
                _NAMES.clear()
            name = _NAMES[session] = "ss:" + quote(session, safe="") + ":"
        return name + (key if _UNRESERVED(key) else quote(key, safe=""))

    @staticmethod
    def split(tag: str) -> tuple[str, str]:
        _, session, key = tag.split(":", 2)
        return unquote(session), unquote(key)

    def shard(self, tag: str) -> int:
        return zlib.crc32(tag.encode()) % self.shards

    def keys(self, tag: str) -> list[str]:
        """turns, meta and lease of a session, and its shard's due index: one hash tag."""
        shard = self.shard(tag)
        return [*self.state(shard, tag), f"{self.prefix}{{sx:{shard}}}:lease:{tag[3:]}", self.due(shard)]

    def state(self, shard: int, tag: str) -> tuple[str, str]:
        """turns and meta of a session in ``shard`` (its own)."""
        base = f"{self.prefix}{{sx:{shard}}}:"
        return f"{base}turns:{tag[3:]}", f"{base}meta:{tag[3:]}"

    def due(self, shard: int) -> str:
        return f"{self.prefix}{{sx:{shard}}}:due"


@dataclass(frozen=True)
class SessionTerms:
    """What the state needs of a session's config: its bounds and times."""

    gap_s: float
    grace_s: float
    max_turns: int
    max_bytes: int
    settle_s: float = 5.0
    #: keep every turn's idempotency mark from the start: an agent run (``assemble: spans``), whose steps
    #: (tool and root spans) have no result that vouches for them
    marked: bool = False


@dataclass
class AppendReport:
    """What became of the turns of one :meth:`SessionStore.append`, per session name and outcome."""

    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))


@dataclass(frozen=True)
class Claim:
    """A session claimed for closing: its figures and its kept turns (decoded, in thread order)."""

    tag: str
    session: str
    key: str
    now: float
    seq: int
    revision: int
    first: float
    last: float
    arrival: float
    ended: bool
    received: int
    dropped: int
    previous: bytes  # the last published result (GradedResult JSON), b"" before the first
    turns: list[bytes]  # each turn's JSON

    @property
    def closed_by(self) -> str:
        if self.ended:
            return "end"
        return "gap" if self.last <= self.arrival else "idle"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SessionStore:
    """Appends turns and claims and finishes closings, for every session of the suite file."""

    def __init__(
        self,
        client: Client,
        terms: dict[str, SessionTerms],
        *,
        prefix: str = "streameval:",
        lease_s: float = 30.0,
        worker_id: str = "worker",
        shards: int = DUE_SHARDS,
    ) -> None:
        self.client = client
        self.terms = terms
        self.keys = SessionKeys(prefix, shards)
        self._swept = False  # the earlier layout's index shards beyond ours (due())
        self._term_args = {
            name: [
                repr(t.gap_s),
                repr(t.grace_s),
                t.max_turns,
                t.max_bytes,
                int(t.gap_s + t.grace_s) + _OPEN_MARGIN_S,
                repr(t.settle_s),
            ]
            for name, t in terms.items()
        }
        # an agent run keeps its marks (16), sent with its turns (8)
        self._marked = {name: 24 if t.marked else 0 for name, t in terms.items()}
        self.lease_ms = int(lease_s * 1000)
        self.worker_id = worker_id
        self._append = client.register_script(scripts.APPEND)
        self._claim = client.register_script(scripts.CLAIM)
        self._finish = client.register_script(scripts.FINISH)
        self._due_set = client.register_script(scripts.DUE_SET)
        self._renew = client.register_script(scripts.RENEW)

    async def append(self, turns: Sequence[Turn], fresh: AbstractSet[str] = frozenset()) -> AppendReport:
        """Append keyed turns: one script call per shard (at most ``shards`` per batch, every session of
        the shard in it, its due-index entries too), all in one round trip (one per node on a cluster).

        Idempotent per turn id. ``fresh``: the ids of turns the caller knows were never appended (their
        results were just counted for the first time, and a turn is appended only after its result is
        recorded); those are appended without a look. Every other turn is looked up in its session
        (streameval.features.sessions.scripts, APPEND): with the default, every turn is."""
        report = AppendReport()
        groups: dict[tuple[str, str], list[Turn]] = {}
        for turn in turns:
            if turn.key is not None:
                group = groups.get((turn.session, turn.key))
                if group is None:
                    groups[(turn.session, turn.key)] = [turn]
                else:
                    group.append(turn)
        if not groups:
            return report
        shards: dict[int, _ShardCall] = {}
        calls = []
        tag, shard_of = self.keys.tag, self.keys.shard
        chunks = (
            (session, key, turns_of_session[start : start + _MAX_CALL_TURNS])
            for (session, key), turns_of_session in groups.items()
            # a session's turns in calls of at most _MAX_CALL_TURNS, one after the other (as batches would be)
            for start in range(0, len(turns_of_session), _MAX_CALL_TURNS)
        )
        for session, key, group in chunks:
            name = tag(session, key)
            shard = shard_of(name)
            call = shards.get(shard)
            if call is None or (call.size and call.size + len(group) > _MAX_CALL_TURNS):
                call = shards[shard] = _ShardCall(self.keys.due(shard))
                calls.append(call)
            term = call.terms.get(session)
            if term is None:
                term = call.terms[session] = len(call.terms) + 1
                call.term_args += self._term_args[session]
            call.keys += self.keys.state(shard, name)
            times = [turn.time for turn in group]
            ends = bytes([49 if turn.end else 48 for turn in group])  # '1' / '0'
            flags = (
                (49 in ends)
                | (2 if len(group) > 1 and len({turn.id for turn in group}) < len(group) else 0)
                | (0 if all(turn.id in fresh for turn in group) else 4)
                | self._marked[session]
            )
            if flags & 6:  # a turn to look up or an id twice: their marks go with them
                flags |= 8
            entries = [b"%020.6f" % turn.time + turn.payload for turn in group]
            size = sum(map(len, entries)) + 10 * len(entries)  # what they count toward max_bytes
            parts = call.parts
            parts += (_SESSION.pack(min(times), max(times), term, len(group), flags, size), ends)
            if flags & 8:  # each turn's mark: the id as the turn's JSON writes it (between the quotes)
                for turn in group:
                    mark = b"i:" + _dumps(turn.id)[1:-1]
                    parts += (_LENGTH.pack(len(mark)), mark)
            call.entries += entries
            call.groups.append((session, len(group)))
            call.size += len(group)
        replies = await guard(
            run_scripts(
                self.client,
                [
                    (self._append, c.keys, [len(c.terms), *c.term_args, b"".join(c.parts), *c.entries])
                    for c in calls
                ],
            )
        )
        counts = report.counts
        for call, reply in zip(calls, replies, strict=True):
            codes = reply.encode() if isinstance(reply, str) else reply
            if len(codes) != call.size:
                raise RuntimeError(f"the append script answered {len(codes)} codes for {call.size} turns")
            at = 0
            for session, n in call.groups:
                part = codes[at : at + n]
                at += n
                if part.count(49) == n:  # every turn appended: the common case
                    counts[(session, "appended")] += n
                else:
                    for code in part:
                        counts[(session, _OUTCOMES[code])] += 1
        return report

    async def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` sessions per shard whose deadline is at or before ``now`` (to the millisecond):
        (tag, its score in the index: the deadline in whole milliseconds). The first call also deletes the
        index shards beyond this shard count that the earlier layout had (16): nothing reads them."""
        if not self._swept:
            beyond = [self.keys.due(shard) for shard in range(self.keys.shards, LEGACY_SHARDS)]
            if beyond:
                async with self.client.pipeline(transaction=False) as pipe:
                    for key in beyond:  # one key a command: each its own slot on a cluster
                        pipe.delete(key)
                    await guard(pipe.execute())
            self._swept = True
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.keys.shards):
                pipe.zrangebyscore(
                    self.keys.due(shard), "-inf", math.floor(now * 1000), start=0, num=limit, withscores=True
                )
            replies = await guard(pipe.execute())
        out, strays = [], []
        for shard, reply in enumerate(replies):
            for member, score in reply:
                tag = _text(member)
                if self.keys.shard(tag) == shard:
                    out.append((tag, float(score)))
                else:  # left by another shard count: that state is not read (docs/sessions.md, "Redis layout")
                    strays.append((shard, member))
        if strays:
            async with self.client.pipeline(transaction=False) as pipe:
                for shard, member in strays:
                    pipe.zrem(self.keys.due(shard), member)
                await guard(pipe.execute())
        return out

    async def claim(self, tag: str, score: float) -> Claim | tuple[str, float | None]:
        """Take a due session (read with ``score`` in the due index) for closing, or why not: ('gone' |
        'closed' | 'busy' | 'later', deadline). Gone or closed, its due entry is dropped; later, moved to
        the deadline (in the same script; unless an append changed the entry meanwhile)."""
        args = [self.worker_id, self.lease_ms, tag, repr(score)]
        [reply] = await guard(run_scripts(self.client, [(self._claim, self.keys.keys(tag), args)]))
        status = _text(reply[0])
        if status != "ok":
            return status, float(_text(reply[1])) if status == "later" else None
        session, key = self.keys.split(tag)
        r = reply
        return Claim(
            tag,
            session,
            key,
            now=float(_text(r[1])),
            seq=int(r[2]),
            revision=int(r[3]),
            first=float(r[4]),
            last=float(r[5]),
            arrival=float(r[6]),
            ended=_text(r[7]) == "1",
            received=int(r[8]),
            dropped=int(r[9]),
            previous=bytes(r[10]) if r[10] else b"",
            # event-time order, ties in arrival order: the list's order (a stable sort)
            turns=[m[_TIME:] for m in sorted((bytes(m) for m in r[12:]), key=lambda m: m[:_TIME])],
        )

    async def finish(
        self, claim: Claim, score: float, published: bytes, closed_by: str
    ) -> tuple[str, float | None]:
        """Mark ``claim`` closed (or reopened, when turns came in meanwhile): ('closed' | 'lost', None) or
        ('reopened', deadline); its due entry (read with ``score``) is dropped or moved to the deadline in
        the same script, unless an append changed it. ``published`` is the result the next revision
        corrects the aggregates for."""
        terms = self.terms[claim.session]
        args = [
            self.worker_id,
            claim.seq,
            claim.revision + 1,
            published,
            repr(terms.grace_s),
            TOMBSTONE_S,
            closed_by,
            claim.tag,
            repr(score),
        ]
        [reply] = await guard(run_scripts(self.client, [(self._finish, self.keys.keys(claim.tag), args)]))
        status = _text(reply[0])
        return status, float(_text(reply[1])) if status == "reopened" else None

    async def renew(self, tag: str) -> bool:
        """Extend this worker's closing lease on ``tag`` by ``lease_s``; False when it is not ours any more."""
        lease = self.keys.keys(tag)[2]
        [reply] = await guard(
            run_scripts(self.client, [(self._renew, [lease], [self.worker_id, self.lease_ms])])
        )
        return bool(reply)

    async def move(self, tag: str, score: float, deadline: float | None) -> None:
        """Set a due entry read with ``score`` to ``deadline`` (None: drop it), unless an append changed it."""
        call = (
            self._due_set,
            [self.keys.due(self.keys.shard(tag))],
            [tag, repr(score), "" if deadline is None else math.floor(deadline * 1000)],
        )
        await guard(run_scripts(self.client, [call]))

    async def open_count(self) -> int:
        """Sessions waiting in the due index (open, or closed within a tick)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.keys.shards):
                pipe.zcard(self.keys.due(shard))
            return sum(int(n) for n in await guard(pipe.execute()))


def session_terms(sessions: Sequence[Any], settle_s: float = 5.0) -> dict[str, SessionTerms]:
    """Each configured session's :class:`SessionTerms` (``sessions``: :class:`streameval.config.Session`)."""
    return {
        s.name: SessionTerms(
            s.config.gap_s,
            s.config.grace,
            s.config.max_turns,
            s.config.max_bytes,
            settle_s,
            marked=s.config.assemble == "spans",
        )
        for s in sessions
    }
