"""One-time migrations of Redis state written by earlier versions (``streameval migrate``; docs/operations.md).

``marks``: idempotency marks of the layout before the digest buckets (one hash per pair, replay generation
and shard, ``mk:{gen}:{shard}``) move into the buckets the record script reads (streameval.store). Workers
no longer look for the old layout on every batch: run this once after the last worker of a version before
the buckets has stopped (until then, an event it counted could be counted again after the upgrade).
"""

from __future__ import annotations

import math
from typing import cast

from . import _lua
from .keyspace import Client, Keys, guard, run_scripts
from .store import MARK_BUCKET_BYTES
from .store_codec import as_text

__all__ = ["LEGACY_MARK_SHARDS", "migrate_marks"]

#: shards of the layout before the buckets (a mark's shard: its digest's first 2 bytes, big-endian, mod this)
LEGACY_MARK_SHARDS = 64


async def migrate_marks(client: Client, keys: Keys, *, seen_ttl_s: int, now: float) -> int:
    """Move every pair's old-layout marks of this replay generation and the previous one into the buckets;
    returns how many marks moved (0 on a second run). One script call per pair and generation."""
    script = client.register_script(_lua.MIGRATE_MARKS)
    generation = int(now // seen_ttl_s)
    pairs = [as_text(p) for p in cast(list[bytes], await guard(client.zrange(keys.pairs, 0, -1)))]
    moved = 0
    for pair in pairs:
        calls = []
        for gen in (generation, generation - 1):
            ttl = max(1, math.ceil((gen + 2) * seen_ttl_s + 60 - now))
            old = [keys.legacy_marks(pair, gen, shard) for shard in range(LEGACY_MARK_SHARDS)]
            calls.append((script, [keys.marks(pair, gen), *old], [MARK_BUCKET_BYTES, ttl]))
        moved += sum(int(n) for n in await guard(run_scripts(client, calls)))
    return moved
