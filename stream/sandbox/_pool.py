"""Warm pools of confined processes: Python zygotes and Node hosts, one per slot (one per core).

A slot serves one call at a time over :mod:`._wire` frames. The pool replaces a slot (kill, start a
new one in the background) when it died, did not answer within the call's timeout plus a grace
period, answered with a kind listed in ``restart_on``, or reached ``recycle_after`` calls. Pools are
shared by every evaluator of the same kind on the same event loop and reference-counted
(:func:`acquire_pool` / :func:`release_pool`), so 50 code evaluators still start one pool.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._errors import SandboxUnavailable
from ._wire import MAX_FRAME, encode

__all__ = ["SandboxPool", "acquire_pool", "default_slots", "release_pool"]

log = logging.getLogger(__name__)

_STARTUP_TIMEOUT_S = 30.0
_GRACE_S = 1.0  # beyond the call's own timeout, which the zygote/host enforce themselves
_STDERR_TAIL = 2048
_CLOSED_POLL_S = 1.0  # how often a caller waiting for a slot checks that the pool is still open


@dataclass(eq=False)
class _Slot:
    proc: asyncio.subprocess.Process
    calls: int = 0
    stderr: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None

    async def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode(message))
        await self.proc.stdin.drain()

    async def receive(self) -> Any:
        assert self.proc.stdout is not None
        (size,) = struct.unpack(">I", await self.proc.stdout.readexactly(4))
        if size > MAX_FRAME:
            raise ValueError(f"the sandbox sent a frame of {size} bytes")
        return json.loads(await self.proc.stdout.readexactly(size))

    async def drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(4096):
            self.stderr += chunk
            del self.stderr[:-_STDERR_TAIL]

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()
        if self.reader is not None:
            await self.reader

    def death(self) -> str:
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return how + (f"; last output: {' | '.join(tail)}" if tail else "")


class SandboxPool:
    """``size`` processes started from ``argv`` with an empty environment."""

    def __init__(
        self,
        label: str,
        argv: list[str],
        size: int,
        *,
        hello: dict[str, Any] | None = None,
        recycle_after: int | None = None,
        restart_on: frozenset[str] = frozenset(),
    ) -> None:
        self.label = label
        self.argv = argv
        self.size = size
        self.hello = hello
        self.recycle_after = recycle_after
        self.restart_on = restart_on
        self.missing: list[str] = []
        self._idle: asyncio.Queue[_Slot] = asyncio.Queue()
        self._all: set[_Slot] = set()
        self._respawns: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        results = await asyncio.gather(*(self._spawn() for _ in range(self.size)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for slot in results:
            if isinstance(slot, _Slot):
                self._idle.put_nowait(slot)
        if failures:
            await self.close()
            raise failures[0]

    async def _spawn(self) -> _Slot:
        proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},
            limit=MAX_FRAME,
        )
        slot = _Slot(proc)
        slot.reader = asyncio.ensure_future(slot.drain_stderr())
        self._all.add(slot)
        try:
            if self.hello is not None:
                await slot.send(self.hello)
            reply = await asyncio.wait_for(slot.receive(), _STARTUP_TIMEOUT_S)
        except (OSError, EOFError, ValueError, TimeoutError) as exc:
            await slot.kill()
            self._all.discard(slot)
            raise SandboxUnavailable(f"the {self.label} did not start ({slot.death()})") from exc
        if "error" in reply:
            await slot.kill()
            self._all.discard(slot)
            raise SandboxUnavailable(str(reply["error"]))
        if reply.get("missing") and reply["missing"] != self.missing:
            self.missing = list(reply["missing"])
            log.warning("%s runs with WEAKER confinement; missing: %s", self.label, "; ".join(self.missing))
        return slot

    async def call(self, request: dict[str, Any], timeout_ms: int) -> Any:
        """Send one request; the reply, or an ``{"error": ...}`` reply when the slot failed.

        ``timeout_ms`` limits the call itself, from the moment a slot takes it: the time spent waiting
        for a free slot never counts (a busy worker must not turn slow-but-valid code into timeouts
        and scores of 0). The wait has no limit of its own; the worker's intake is bounded, so a
        backlog waits in Kafka, not here.
        """
        slot = await self._take()
        budget = timeout_ms / 1000 + _GRACE_S
        keep = False
        try:
            await slot.send(request)
            reply = await asyncio.wait_for(slot.receive(), budget)
            slot.calls += 1
            keep = not (isinstance(reply, dict) and reply.get("error") in self.restart_on)
            keep = keep and not (self.recycle_after and slot.calls >= self.recycle_after)
            return reply
        except TimeoutError:
            return {
                "error": "timeout",
                "message": f"timeout: the {self.label} did not answer within {timeout_ms} ms",
            }
        except (OSError, EOFError, asyncio.IncompleteReadError, ValueError):
            await slot.kill()
            return {"error": "crash", "message": f"the {self.label} died ({slot.death()})"}
        finally:
            if keep:
                self._idle.put_nowait(slot)
            else:
                self._replace(slot)

    async def _take(self) -> _Slot:
        """The next idle slot, however long that takes; raises once the pool is closed."""
        while True:
            if self._closed:
                raise SandboxUnavailable(f"the {self.label} pool is closed")
            try:
                return await asyncio.wait_for(self._idle.get(), _CLOSED_POLL_S)
            except TimeoutError:
                continue

    def _replace(self, slot: _Slot) -> None:
        task = asyncio.ensure_future(self._respawn(slot))
        self._respawns.add(task)
        task.add_done_callback(self._respawns.discard)

    async def _respawn(self, old: _Slot) -> None:
        await old.kill()
        self._all.discard(old)
        delay = 0.1
        while not self._closed:
            try:
                self._idle.put_nowait(await self._spawn())
                return
            except (
                SandboxUnavailable
            ) as exc:  # keep trying: a worker without slots waits, never runs unconfined
                log.error("cannot restart a %s: %s", self.label, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._respawns):
            task.cancel()
        await asyncio.gather(*self._respawns, return_exceptions=True)
        await asyncio.gather(*(slot.kill() for slot in list(self._all)), return_exceptions=True)
        self._all.clear()


# -- sharing between evaluators ------------------------------------------------------------------
_POOLS: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}  # (loop id, key) -> [pool, users]
_LOCK: dict[int, asyncio.Lock] = {}


async def acquire_pool(key: tuple[Any, ...], factory: Callable[[], SandboxPool]) -> SandboxPool:
    """The started pool for ``key`` on the running loop, started by ``factory`` for its first user."""
    loop_key = id(asyncio.get_running_loop())
    async with _LOCK.setdefault(loop_key, asyncio.Lock()):
        entry = _POOLS.get((loop_key, key))
        if entry is None:
            pool = factory()
            await pool.start()
            entry = _POOLS[(loop_key, key)] = [pool, 0]
        entry[1] += 1
        pool_: SandboxPool = entry[0]
        return pool_


async def release_pool(key: tuple[Any, ...]) -> None:
    """Drop one user of ``key``'s pool; the last user closes it."""
    loop_key = id(asyncio.get_running_loop())
    async with _LOCK.setdefault(loop_key, asyncio.Lock()):
        entry = _POOLS.get((loop_key, key))
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _POOLS[(loop_key, key)]
            await entry[0].close()
        if not any(k[0] == loop_key for k in _POOLS):
            _LOCK.pop(loop_key, None)


def default_slots() -> int:
    """One slot per core the worker may use."""
    return len(os.sched_getaffinity(0)) or 1
