"""The ``json`` input format: any JSON document, made into a request event by the input's ``map:``.

Each mapped field takes the value at its path (:mod:`._path`). A path that finds nothing (or ``null``)
dead-letters the message as ``schema`` with the field and the path in the reason, unless the field is
listed in ``optional``. ``set`` gives fields one value for every event; ``derive_id: sha256`` makes the
id the hex sha256 of the message's bytes (the same message always gets the same id).

Conversions, so that common shapes need no pre-processing: a number at ``id`` becomes its decimal
string, a ``usage.<field>`` (``usage.input_tokens``: one field of the usage block) goes into the event's
``usage`` object, and a number at ``timestamp`` is read as Unix time in seconds (milliseconds when it is larger
than 10^11, nanoseconds when larger than 10^17). Everything else must already have the request
event's type; the pipeline checks the event it is handed as it checks a native one.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from ..envelope import Source
from ..errors import EventError, SchemaViolation
from ..models import format_time
from ..strictjson import DEFAULT_MAX_EVENT_DEPTH, loads_strict
from ._base import Item, check_size
from ._config import JsonInput
from ._path import MISSING, compile_path

__all__ = ["JsonDecoder", "load_json"]


def load_json(raw: bytes, *, max_bytes: int, max_depth: int = DEFAULT_MAX_EVENT_DEPTH) -> Any:
    """Strict JSON (no duplicate keys, NaN, overflowing numbers or deep nesting) within ``max_bytes``;
    raises :class:`EventError`."""
    check_size(raw, max_bytes)
    return loads_strict(raw, max_depth=max_depth)


def _epoch_to_time(value: float, path: object) -> str:
    if value > 1e17:
        value /= 1e9
    elif value > 1e11:
        value /= 1e3
    try:
        return format_time(value)
    except (OverflowError, OSError, ValueError):
        raise SchemaViolation(f"map.timestamp: {path} is {value!r}, not a Unix time") from None


class JsonDecoder:
    format = "json"

    def __init__(self, spec: JsonInput, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH) -> None:
        self.spec = spec
        self.max_depth = max_depth
        self._paths = [(field, compile_path(path)) for field, path in spec.map.items()]
        self._optional = frozenset(spec.optional)
        self._usage_set = tuple(f for f in spec.set if f.startswith("usage."))

    def decode(self, raw: bytes, source: Source) -> list[Item]:
        try:
            return [Item(orjson.dumps(self.event(raw)), source)]
        except EventError as exc:
            return [Item(raw, source, exc)]

    def event(self, raw: bytes) -> dict[str, Any]:
        """The request event (a dict) of one message. Raises :class:`EventError`."""
        document = load_json(raw, max_bytes=self.spec.max_message_bytes, max_depth=self.max_depth)
        event: dict[str, Any] = dict(self.spec.set)
        missing: list[str] = []
        for field, path in self._paths:
            value = path.find(document)
            if value is MISSING or value is None:
                if field not in self._optional:
                    missing.append(f"map.{field}: {path} found {'null' if value is None else 'nothing'}")
                continue
            if field == "id" and isinstance(value, int | float) and not isinstance(value, bool):
                value = str(value)
            elif field == "timestamp" and isinstance(value, int | float) and not isinstance(value, bool):
                value = _epoch_to_time(float(value), path)
            if field.startswith("usage."):
                event.setdefault("usage", {})[field[6:]] = value
            else:
                event[field] = value
        for field in self._usage_set:
            event.setdefault("usage", {})[field[6:]] = event.pop(field)
        if self.spec.derive_id == "sha256":
            event["id"] = hashlib.sha256(raw).hexdigest()
        event_id = event.get("id") if isinstance(event.get("id"), str) else None
        if missing:
            raise SchemaViolation("; ".join(missing), event_id=event_id)
        return event
