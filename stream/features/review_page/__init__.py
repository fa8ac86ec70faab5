"""The review page: a queue people label in the browser (docs/feedback.md, "The review page").

The worker keeps the review items it publishes (:class:`ReviewPageStore`, when the suite file's ``review:``
keeps any); the web app serves ``/review`` and its endpoints (:mod:`.web`, built by the composition root only
when the page is on); ``streameval review export`` writes the labelled items as JSONL (:func:`export_lines`).
"""

from __future__ import annotations

from ._export import write_export
from ._items import EXPORT_FORMATS, ExportFormat, export_lines, form_of, item_key
from ._store import Progress, ReviewPageStore, Summary

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "Progress",
    "ReviewPageStore",
    "Summary",
    "export_lines",
    "form_of",
    "item_key",
    "write_export",
]
