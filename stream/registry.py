"""Custom evaluators registered at run time (the evaluator-module spec §2, §5), stored in Redis, seen live by workers.

A custom evaluator is a ``code`` evaluator (Python or Node.js, run by the sandbox) with a name, a
description and a version that goes up by one on every update. The registry API writes them with
:class:`RegistryStore`; a worker keeps a :class:`LiveRegistry` whose copy follows every change
(Redis pub/sub wakes it at once, a periodic resync catches anything a dropped subscription missed),
so a suite's ``evaluator: registered`` step uses the new code without a restart.

Redis keys (``P`` = the key prefix):

* ``P{registry}:ev:{id}``   the record as JSON
* ``P{registry}:names``     hash name -> id (names are unique)
* ``P{registry}:rev``       counter bumped on every change (the resync compares it)
* channel ``P{registry}:changes``  the id of each changed record

(one hash slot, so the scripts run on Redis Cluster; names in streameval.keyspace). The records have no
TTL: their number and size are bounded by the registry's limits.

Writes are Lua scripts, so a name check (and the count limit) and its write cannot interleave with
another writer's.

Bounds (:class:`RegistryLimits`): the store refuses a new evaluator once it holds ``max_evaluators``
(:class:`RegistryFull`); the API refuses code over ``max_code_bytes``. A worker's
:class:`LiveRegistry` loads at most ``max_evaluators`` records, the first by name, and logs how
many it left out (only possible when another writer used a higher limit, or the limit was lowered);
a step naming one left out fails as "no registered evaluator" like an unknown name.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from . import _lua
from .errors import StreamEvalError
from .keyspace import Client, Keys, guard, run_scripts
from .models import format_time

__all__ = [
    "CodeConfig",
    "EvaluatorRecord",
    "LiveRegistry",
    "NameTaken",
    "RegistryFull",
    "RegistryLimits",
    "RegistryStore",
    "bind_live_registry",
    "live_registry",
]

log = logging.getLogger(__name__)


class CodeConfig(BaseModel):
    """The evaluator-module spec §2 ``CodeConfig``; ``timeout`` in milliseconds (default 5000, the evaluator-module spec §4.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["python", "nodejs"]
    code: str = Field(min_length=1, max_length=200_000)
    timeout: int = Field(default=5000, ge=1, le=60_000)


class EvaluatorRecord(BaseModel):
    """A stored custom evaluator (the API's camelCase names, as the evaluator-module spec §5 returns them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    description: str | None = None
    type: Literal["code"] = "code"
    config: CodeConfig
    isPreset: Literal[False] = False
    version: int = Field(ge=1)
    createdAt: str
    updatedAt: str

    @property
    def version_tag(self) -> str:
        """What a result records as the evaluator version: ``{id}@{version}``."""
        return f"{self.id}@{self.version}"


class NameTaken(StreamEvalError):
    """Another custom evaluator already has this name."""


class RegistryFull(StreamEvalError):
    """The registry holds ``max_evaluators`` custom evaluators: a new one is refused."""


DEFAULT_MAX_EVALUATORS = 100
DEFAULT_MAX_CODE_BYTES = 64 * 1024  # UTF-8 bytes of one evaluator's code


@dataclass(frozen=True, slots=True)
class RegistryLimits:
    """Bounds of the registry (settings ``STREAMEVAL_REGISTRY_MAX_*``)."""

    max_evaluators: int = DEFAULT_MAX_EVALUATORS
    max_code_bytes: int = DEFAULT_MAX_CODE_BYTES


class RegistryStore:
    """CRUD of custom evaluators in Redis. Redis outages raise :class:`StoreUnavailable`."""

    def __init__(
        self, client: Client, *, prefix: str = "streameval:", limits: RegistryLimits | None = None
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.limits = limits or RegistryLimits()
        self.keys = Keys(prefix)
        self.names_key = self.keys.registry_names
        self.rev_key = self.keys.registry_rev
        self.channel = self.keys.registry_channel
        self._put = client.register_script(_lua.REGISTRY_PUT)
        self._delete = client.register_script(_lua.REGISTRY_DELETE)

    def _key(self, evaluator_id: str) -> str:
        return self.keys.registry_record(evaluator_id)

    async def _guard(self, call: Any) -> Any:
        return await guard(call)

    async def get(self, evaluator_id: str) -> EvaluatorRecord | None:
        raw = await self._guard(self.client.get(self._key(evaluator_id)))
        return EvaluatorRecord.model_validate_json(raw) if raw else None

    async def list(self, *, limit: int | None = None) -> list[EvaluatorRecord]:
        """Every custom evaluator, oldest first; with ``limit``, at most that many: the first by name."""
        names = await self._guard(self.client.hgetall(self.names_key))
        pairs = sorted((_text(k), _text(v)) for k, v in names.items())
        if limit is not None and len(pairs) > limit:
            log.warning(
                "the registry holds %d evaluators; loading the first %d by name (the limit)",
                len(pairs),
                limit,
            )
            pairs = pairs[:limit]
        ids = [evaluator_id for _, evaluator_id in pairs]
        if not ids:
            return []
        raws = await self._guard(self.client.mget([self._key(i) for i in ids]))
        records = [EvaluatorRecord.model_validate_json(r) for r in raws if r]
        return sorted(records, key=lambda r: (r.createdAt, r.id))

    async def revision(self) -> int:
        return int(await self._guard(self.client.get(self.rev_key)) or 0)

    async def create(self, *, name: str, description: str | None, config: CodeConfig) -> EvaluatorRecord:
        now = format_time(time.time())
        record = EvaluatorRecord(
            id=str(uuid.uuid4()),
            name=name,
            description=description,
            config=config,
            version=1,
            createdAt=now,
            updatedAt=now,
        )
        await self._write(record, old_name="")
        return record

    async def update(self, current: EvaluatorRecord, **changes: Any) -> EvaluatorRecord:
        """Store ``current`` with ``changes`` applied, version + 1. Raises :class:`NameTaken`."""
        record = current.model_copy(
            update={**changes, "version": current.version + 1, "updatedAt": format_time(time.time())}
        )
        await self._write(record, old_name=current.name)
        return record

    async def _write(self, record: EvaluatorRecord, *, old_name: str) -> None:
        """Store ``record``. Raises :class:`NameTaken`, or :class:`RegistryFull` for a new record."""
        most = self.limits.max_evaluators
        keys = [self._key(record.id), self.names_key, self.rev_key]
        args = [record.id, record.name, record.model_dump_json(), old_name, self.channel, most]
        [ok] = await guard(run_scripts(self.client, [(self._put, keys, args)]))
        if ok == 0:
            raise NameTaken(f"an evaluator named {record.name!r} already exists")
        if ok == -1:
            raise RegistryFull(f"the registry holds {most} custom evaluators, the limit; delete one first")

    async def delete(self, record: EvaluatorRecord) -> bool:
        keys = [self._key(record.id), self.names_key, self.rev_key]
        [deleted] = await guard(
            run_scripts(self.client, [(self._delete, keys, [record.id, record.name, self.channel])])
        )
        return bool(deleted)


class LiveRegistry:
    """A worker's in-memory copy of the registry, kept current by pub/sub plus a periodic resync.

    :meth:`get` answers from memory (no Redis round trip per event). :meth:`start` loads the
    records (at most the store's ``limits.max_evaluators``) and starts the follower task;
    :meth:`close` stops it.
    """

    def __init__(self, store: RegistryStore, *, resync_s: float = 5.0) -> None:
        self.store = store
        self.resync_s = resync_s
        self.max_evaluators = store.limits.max_evaluators
        self._by_id: dict[str, EvaluatorRecord] = {}
        self._by_name: dict[str, EvaluatorRecord] = {}
        self._revision = -1
        self._task: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()  # set after each reload (tests wait on it)
        # called after each reload (the worker recomputes the versions of suites with registered steps)
        self.listeners: list[Callable[[LiveRegistry], None]] = []

    def get(self, *, evaluator_id: str | None = None, name: str | None = None) -> EvaluatorRecord | None:
        return self._by_id.get(evaluator_id) if evaluator_id is not None else self._by_name.get(name or "")

    async def reload(self) -> None:
        revision = await self.store.revision()
        records = await self.store.list(limit=self.max_evaluators)
        self._by_id = {r.id: r for r in records}
        self._by_name = {r.name: r for r in records}
        self._revision = revision
        for listener in self.listeners:
            listener(self)
        self.changed.set()

    def versions(self) -> dict[str, str]:
        """Each record's reference (its id and its name) -> its version tag ``id@n`` (suite versions)."""
        out = {r.id: r.version_tag for r in self._by_id.values()}
        out.update({r.name: r.version_tag for r in self._by_name.values()})
        return out

    async def start(self) -> None:
        await self.reload()
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="registry-follower")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        # redis-py can swallow a cancellation that lands while the pub/sub connection is being made
        # (the task then stays "cancelling" and waits out ``resync_s`` in get_message): cancel again
        # until the task has ended, without swallowing a cancellation of the caller itself.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)
        if not task.cancelled() and task.exception() is not None:
            log.warning("registry follower ended with %r", task.exception())

    async def _follow(self) -> None:
        while True:
            try:
                async with self.store.client.pubsub() as pubsub:
                    await pubsub.subscribe(self.store.channel)
                    await self.reload()  # anything changed before the subscription took effect
                    while True:
                        if _cancel_swallowed():
                            raise asyncio.CancelledError
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=self.resync_s
                        )
                        if message is not None or await self.store.revision() != self._revision:
                            await self.reload()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: keep serving the last copy, try again
                log.warning("registry follower lost Redis (%s); retrying in %.0fs", exc, self.resync_s)
                await asyncio.sleep(self.resync_s)


def _cancel_swallowed() -> bool:
    """Whether this task was cancelled while a library call caught the CancelledError."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


_LIVE: dict[str, LiveRegistry] = {}


def bind_live_registry(registry: LiveRegistry | None) -> None:
    """Make ``registry`` the one ``evaluator: registered`` steps read (the worker binds it at start)."""
    _LIVE.pop("current", None)
    if registry is not None:
        _LIVE["current"] = registry


def live_registry() -> LiveRegistry | None:
    return _LIVE.get("current")
