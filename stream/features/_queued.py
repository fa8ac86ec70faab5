"""What the score-shift and embedding-drift window steps share: each published window of the step's size is
queued when it closes, and on each tick the queued windows are folded into each pair's state in window
order, under one lease (:meth:`streameval.feature.WindowContext.fold_in_order`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare, check_kept_window
from ..keyspace import Keys, guard
from ..outputs import Send
from ..store import ResultStore

__all__ = ["QueuedFoldStep"]


class QueuedFoldStep:
    """A window step (streameval.feature.WindowStep) that folds the windows of one size in order. A subclass
    names its setting (``setting``: the suite file key, for the kept-window check), its queue and lease keys
    (``queue_key`` / ``lease_key``: names of :class:`~streameval.keyspace.Keys` methods of the window size)
    and implements :meth:`fold`; ``config.window`` is the size."""

    name: str
    setting: str
    queue_key: str
    lease_key: str

    def __init__(self, config: Any, windows: Sequence[int], *, resolves: bool = False) -> None:
        check_kept_window(self.setting, config.window, windows)
        self.config = config
        # with notify: its alerts' firing state is kept and they resolve (streameval.features._firing)
        self.resolves = resolves

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        """Queue a window of the step's size (folded in order by :meth:`tick`)."""
        if window.size == self.config.window:
            store = cast(ResultStore, ctx.store)
            client, queue, start = store.client, self._key(store.keys, self.queue_key), window.start
            await guard(client.zadd(queue, {str(start): start}))
            await guard(client.zremrangebyscore(queue, "-inf", start - store.window_ttl_s))
        return {}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        return None

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        """Fold the published windows into each pair's state, in window order, under one lease."""
        keys, size = ctx.store.keys, self.config.window

        async def fold(pair: str, start: int) -> None:
            await self.fold(ctx, pair, start, now, send)

        queue, lease = self._key(keys, self.queue_key), self._key(keys, self.lease_key)
        await ctx.fold_in_order(size, queue, lease, fold)

    def _key(self, keys: Keys, name: str) -> str:
        return cast(str, getattr(keys, name)(self.config.window))

    async def fold(self, ctx: WindowContext, pair: str, start: int, now: float, send: Send) -> None:
        """Fold ``pair``'s window at ``start`` into its state (and send its alert, claimed on its id)."""
        raise NotImplementedError
