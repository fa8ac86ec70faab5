"""What the review page keeps of a review item, the labelling form it offers, and the export's lines.

The document kept per item (the worker writes it when it publishes the item on ``evals.review``): the review
item v1 itself, the whole graded result (each judge's score and reasoning, each evaluator's result, the
gates), the request event (whole when its native bytes are at most :data:`MAX_EVENT_BYTES`, else its texts
cut to :data:`TEXT_CHARS` and ``truncated: true``), and the form: the scale of the suite's judges (their
rubric's, "1-5" without a panel) and the criteria of the category's rubric (the multi-judge spec's ten
categories, or the report-quality spec's six dimensions for a report prompt).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import orjson

from ..._util import clip
from ...judges._rubrics import CRITERIA, REPORT_DIMENSIONS, RUBRICS
from ...models import GradedResult, ReviewItem
from ..review import REASONS

__all__ = [
    "EXPORT_FORMATS",
    "MAX_EVENT_BYTES",
    "TEXT_CHARS",
    "ExportFormat",
    "export_lines",
    "form_of",
    "item_document",
    "item_key",
    "summary_of",
]

#: a native event at most this long is kept whole (the export's golden set needs the event as it was)
MAX_EVENT_BYTES = 64 << 10
#: a longer event keeps its input, output, expected answer and references, each cut to this many characters
TEXT_CHARS = 8000
_EVENT_TEXTS = ("id", "model", "input", "output", "expected", "category", "suite", "timestamp")

ExportFormat = Literal["items", "labels", "events"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("items", "labels", "events")


def item_key(model: str, suite: str, event_id: str) -> str:
    """The item's key: the same event id under another model or suite is another item."""
    return hashlib.blake2b(f"{model}\0{suite}\0{event_id}".encode(), digest_size=8).hexdigest()


def form_of(result: GradedResult) -> dict[str, Any]:
    """The labelling form of a result: ``scale`` and ``criteria`` (name, label, meaning, levels 5..1)."""
    judges = result.judge.judges if result.judge is not None else []
    scale = judges[0].scale if judges else "1-5"
    names: list[str] = []
    meanings: dict[str, str] = {}
    if result.judge is not None and result.judge.prompt == "report":
        names = list(REPORT_DIMENSIONS)
        meanings = {name: what for name, (_, what) in REPORT_DIMENSIONS.items()}
    else:
        category = result.judge.category if result.judge is not None else result.category
        names = list(RUBRICS.get(category or "", {}))
    criteria = []
    for name in names:
        known = CRITERIA.get(name)
        criteria.append(
            {
                "name": name,
                "label": known.label if known else name,
                "meaning": meanings.get(name) or (known.meaning if known else ""),
                "levels": list(known.levels) if known and scale == "1-5" else [],
            }
        )
    category = result.judge.category if result.judge is not None else result.category
    return {"scale": scale, "category": category, "criteria": criteria}


def _event(raw: bytes | None, event_id: str) -> tuple[dict[str, Any] | None, bool]:
    """The request event of a native message; None for other formats (mapped JSON, OTLP), whose bytes are
    not a request event."""
    if not raw:
        return None, False
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, False
    if not isinstance(doc, dict) or doc.get("id") != event_id or not isinstance(doc.get("output"), str):
        return None, False
    if len(raw) <= MAX_EVENT_BYTES:
        return doc, False
    cut: dict[str, Any] = {
        k: clip(v, TEXT_CHARS) if isinstance(v, str) else v
        for k, v in doc.items()
        if k in _EVENT_TEXTS and isinstance(v, str | None)
    }
    refs = doc.get("references")
    if isinstance(refs, list):
        cut["references"] = [clip(r, TEXT_CHARS) for r in refs[:20] if isinstance(r, str)]
    return cut, True


def item_document(
    item: ReviewItem,
    result: GradedResult,
    raw: bytes | None,
    reviewers: int,
    thread: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The document kept for ``item``; ``thread``: a session's turns (``{role, text}``), shown in place of
    the output."""
    event, truncated = _event(raw, result.id)
    extra = {} if thread is None else {"thread": thread}
    return {
        **extra,
        "key": item_key(item.model, item.suite, item.id),
        "item": item.model_dump(mode="json"),
        "result": result.model_dump(mode="json", exclude_none=True),
        "event": event,
        "truncated": truncated,
        "form": form_of(result),
        "reviewers": reviewers,
    }


def rank_of(item: ReviewItem) -> int:
    """0 is the most important (a failed gate), then judges disagreeing, near the threshold, a control."""
    return min(REASONS.index(r) for r in item.reasons)


def summary_of(item: ReviewItem) -> dict[str, Any]:
    """The few fields the queue's list shows (kept apart from the document, which may be large)."""
    return {
        "id": item.id,
        "score": item.score,
        "passed": item.passed,
        "reason": clip(item.reason, 300),
        "preview": clip(item.output or "", 160),
        "selected_at": item.selected_at,
    }


def export_lines(
    docs: Sequence[tuple[dict[str, Any], Mapping[str, dict[str, Any]]]], kind: ExportFormat
) -> list[bytes]:
    """The JSONL lines of labelled items ``(document, annotator -> label)``.

    ``items``: one line per label, ``{event, result, label}`` (and ``expected``: the corrected answer when
    the label gives one); ``labels``: the labels alone (feedback v1, for ``streameval evaluate --labels``);
    ``events``: each labelled item's request event once, its ``expected`` replaced by the latest corrected
    answer (a golden set for ``streameval evaluate --input``; items without their event, and sessions' items,
    are left out).
    """
    out: list[bytes] = []
    for doc, labels in docs:
        ordered = sorted(
            labels.values(), key=lambda label: (label.get("timestamp") or "", label.get("annotator") or "")
        )
        if not ordered:
            continue
        if kind == "events":
            if doc.get("event") is None or doc.get("truncated") or "thread" in doc:
                # a session's thread event is not an event a producer sends: no golden line
                continue
            event = dict(doc["event"])
            corrected = [label["expected"] for label in ordered if label.get("expected")]
            if corrected:
                event["expected"] = corrected[-1]
            out.append(orjson.dumps(event))
            continue
        for label in ordered:
            if kind == "labels":
                out.append(orjson.dumps(label))
                continue
            line: dict[str, Any] = {"event": doc.get("event"), "result": doc["result"], "label": label}
            if label.get("expected"):
                line["expected"] = label["expected"]
            out.append(orjson.dumps(line))
    return out
