"""``streameval review export``: the labelled items of the review page as JSONL on a stream."""

from __future__ import annotations

from typing import BinaryIO

from ...keyspace import Client
from ._items import ExportFormat, export_lines
from ._store import ReviewPageStore

__all__ = ["write_export"]


async def write_export(
    client: Client,
    prefix: str,
    kind: ExportFormat,
    out: BinaryIO,
    *,
    model: str | None = None,
    suite: str | None = None,
) -> int:
    """Write the labelled items kept under ``prefix`` to ``out`` (one JSON document a line); returns how many
    lines (:func:`~._items.export_lines` says what each format holds)."""
    docs = await ReviewPageStore(client, prefix).labelled_documents(model=model, suite=suite)
    lines = export_lines(docs, kind)
    for line in lines:
        out.write(line + b"\n")
    out.flush()
    return len(lines)
