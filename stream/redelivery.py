"""Reading back the encoded results kept for the redelivery horizon, by pointer, or by digest in the
results hashes of the previous key layout (``res:{gen}``, read only until they expire).
"""

from __future__ import annotations

from collections.abc import Sequence

from .keyspace import Client, Keys
from .store_codec import parse_pointer

__all__ = ["stored_results"]


async def stored_results(
    client: Client, keys: Keys, wanted: Sequence[tuple[str, bytes | None, bytes | None, Sequence[int]]]
) -> list[bytes | None]:
    """The encoded results kept for the redelivery horizon, one per ``(pair, digest, value, generations)``.

    ``value`` is the result id's entry in ``rid:{gen}`` (a :func:`pointer`), ``digest`` the event's (None:
    the entry's own). An entry pointing at another event's result (its id was reused) finds nothing. Without
    a pointer (the previous layout kept the id's digest there, or nothing), the previous layout's results
    hashes ``res:{gen}`` of ``generations`` are read by digest. One round trip; None where nothing is kept.
    """
    plan: list[tuple[int, int]] = []  # (replies, expected length or -1)
    async with client.pipeline(transaction=False) as pipe:
        for pair, digest, value, generations in wanted:
            target = parse_pointer(value, digest)
            if target is not None:
                offset, length, suffix = target
                pipe.getrange(keys.result_blob(pair, suffix), offset, offset + length - 1)
                plan.append((1, length))
                continue
            legacy = (
                digest if digest is not None else (value if value is not None and len(value) == 8 else None)
            )
            if legacy is not None:
                for generation in generations:
                    pipe.hget(keys.results(pair, generation), legacy)
            plan.append((len(generations) if legacy is not None else 0, -1))
        replies = list(await pipe.execute()) if any(n for n, _ in plan) else []
    out: list[bytes | None] = []
    i = 0
    for n, length in plan:
        got = [bytes(r) for r in replies[i : i + n] if r]
        i += n
        if length >= 0:  # the string expired (or was never written): nothing
            out.append(got[0] if got and len(got[0]) == length else None)
        else:
            out.append(got[0] if got else None)
    return out
