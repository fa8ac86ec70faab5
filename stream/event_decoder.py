"""Raw bytes to a validated request event, or the reason it is not one (the pipeline's first step).

An event over ``max_event_bytes`` is rejected before any parsing (memory stays bounded by it); an accepted
one must also be strict JSON (no duplicate keys, NaN/Infinity, or nesting deeper than ``max_event_depth``:
:mod:`streameval.strictjson`) and match the request contract (schemas/request-event.v1.json, mirrored by
:class:`~streameval.models.RequestEvent`). A rejection is an :class:`~streameval.errors.EventError` whose
reason is said in the contract's own terms, in bounded time.
"""

from __future__ import annotations

import gc
import itertools
import re

import orjson
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from . import schemas
from ._util import clip, json_path
from .envelope import DEFAULT_MAX_EVENT_BYTES
from .errors import EventError, EventTooLarge, InvalidJSON, SchemaViolation
from .models import RequestEvent
from .strictjson import DEFAULT_MAX_EVENT_DEPTH, check_depth, check_strict, parse_plain

__all__ = ["EventDecoder"]

_validate_event = RequestEvent.__pydantic_validator__.validate_python  # strict: the model's config
_LISTED_ERRORS = 50  # a rejection lists pydantic's errors only when there are at most this many
_EXPLAIN_MAX_BYTES = 64 * 1024  # larger events are explained in pydantic's words, not jsonschema's
# a key whose value is a NaN or Infinity literal (only searched in an event already rejected, and only in
# the 200 bytes before the literal: bounded time)
_CONSTANT = re.compile(rb'"([^"\\]{1,128})"\s*:\s*(-?Infinity|NaN)')


def _constant_field(raw: bytes) -> str | None:
    """Which key has a NaN or Infinity value in ``raw`` (JSON has neither), when one is found."""
    for literal in (b"NaN", b"Infinity"):
        at = raw.find(literal)
        if at >= 0:
            found = _CONSTANT.search(raw, max(0, at - 200), at + len(literal))
            if found is not None:
                key, value = found.group(1).decode(errors="replace"), found.group(2).decode()
                return f"field {key!r} is {value}, which JSON has not"
    return None


class EventDecoder:
    """Decodes request events within the given limits (module docstring)."""

    def __init__(
        self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, max_event_depth: int = DEFAULT_MAX_EVENT_DEPTH
    ) -> None:
        self.max_event_bytes = max_event_bytes
        self.max_event_depth = max_event_depth
        # Built once: used only to explain a rejection in the contract's own terms.
        self._request_validator = Draft202012Validator(schemas.load("request"))

    def decode(self, raw: bytes) -> RequestEvent:
        """Parse and validate one request event. Raises an :class:`EventError` subclass.

        Events over ``max_event_bytes`` are rejected before any parsing (memory stays bounded by it);
        accepted ones must also be strict JSON (no duplicate keys, NaN/Infinity, or nesting deeper
        than ``max_event_depth``: :mod:`streameval.strictjson`).
        """
        if len(raw) > self.max_event_bytes:
            raise EventTooLarge(f"event is {len(raw)} bytes; the limit is {self.max_event_bytes}")
        event = self._decode_once(raw)
        if event is not None:
            return event
        check_depth(raw, max_depth=self.max_event_depth)  # before pydantic parses any depth
        # Parsing builds only trees (no cycles): with the cyclic GC paused, an event of 350,000 empty
        # arrays costs ~100 ms/MiB instead of ~400 ms, the collector re-walking the heap as it grows.
        paused = gc.isenabled()
        gc.disable()
        try:
            try:
                # pydantic validation mirrors schemas/request-event.v1.json (tests/schemas/test_contracts.py)
                event = RequestEvent.model_validate_json(raw)
            except ValidationError as exc:
                raise self._explain(raw, exc) from None
            check_strict(raw, event_id=event.id)
        finally:
            if paused:
                gc.enable()
        return event

    def _decode_once(self, raw: bytes) -> RequestEvent | None:
        """The event :meth:`decode` gives for ``raw``, parsed once, or None: then :meth:`decode` goes the
        usual way (depth, pydantic's JSON validation, the strict pass), which also gives every rejection.

        One strict parse (:func:`~streameval.strictjson.parse_plain`: orjson's when the bytes are exactly
        its own writing, else the strict pass's) validated by pydantic from Python objects: for a plain
        document (see there) pydantic's JSON parser reads the same values,
        and the request model's strict validation accepts them alike from JSON and from Python
        (tests/core/test_decode_once.py compares the two ways on every corpus and on edge documents).
        Depth is checked after, unless the event cannot nest (no metadata, no blocks: depth 2 at most).
        """
        paused = gc.isenabled()
        gc.disable()  # as in decode
        try:
            document = parse_plain(raw)
            if document is None:
                return None
            try:
                event: RequestEvent = _validate_event(document)
            except ValidationError:
                return None
        finally:
            if paused:
                gc.enable()
        if (
            event.metadata
            or event.report is not None
            or event.retrieval is not None
            or event.agent is not None
            or self.max_event_depth < 2
        ):
            check_depth(raw, max_depth=self.max_event_depth)  # what decode would raise first
        return event

    def _explain(self, raw: bytes, exc: ValidationError) -> EventError:
        """The reason of a rejection, in bounded time: pydantic may report one error per list item or
        unknown key, and listing them (or re-validating with jsonschema) costs ~1 s per MiB."""
        count = exc.error_count()
        errors = exc.errors(include_url=False) if count <= _LISTED_ERRORS else []
        if any(e["type"] == "json_invalid" for e in errors):
            message = errors[0]["msg"].removeprefix("Invalid JSON: ")  # pydantic's prefix says it again
            field = _constant_field(raw)  # NaN for a number: say whose (usage.cost, ...)
            if field is not None:
                message += f" ({field})"
            return InvalidJSON(f"not valid JSON: {clip(message)}")
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as json_exc:
            field = _constant_field(raw)
            return InvalidJSON(f"not valid JSON: {json_exc}" + (f" ({field})" if field is not None else ""))
        event_id = document.get("id") if isinstance(document, dict) else None
        event_id = event_id if isinstance(event_id, str) else None
        found = []
        if len(raw) <= _EXPLAIN_MAX_BYTES:  # jsonschema is pure Python: ~4 µs per list item
            first = itertools.islice(self._request_validator.iter_errors(document), 5)
            found = sorted(first, key=lambda e: list(e.absolute_path))
        if found:
            reason = "; ".join(f"{json_path(e.absolute_path)}: {e.message}" for e in found)
        elif errors:  # a large event, or the schema accepts what pydantic rejects (a contract test gap)
            reason = "; ".join(f"{json_path(e['loc'])}: {e['msg']}" for e in errors[:5])
        else:
            reason = f"{count} problems (not listed for an event of {len(raw)} bytes)"
        return SchemaViolation(f"does not match request-event.v1: {clip(reason)}", event_id=event_id)
