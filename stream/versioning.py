"""Version identity of a definition: a short hash of its canonical JSON (docs/versions.md).

A suite's (or a session suite's) version is :func:`definition_hash` of its *resolved* definition: the
pydantic models after validation, defaults filled in, dumped as JSON with sorted keys and no
whitespace. The file's layout, its comments and its key order never reach that JSON, so they do not
change the version; any value that changes what a result means does.

Pure functions, no I/O: the configuration computes the versions once per load (never per event).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["VERSION_CHARS", "VERSION_PATTERN", "canonical", "canonical_json", "definition_hash", "is_version"]

#: hex characters of a version: 48 bits, a collision between two versions of one suite is ~1 in 10^14
VERSION_CHARS = 12
VERSION_PATTERN = re.compile(r"^[0-9a-f]{12}$")


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data: pydantic models dumped (mode ``json``), mappings with string keys,
    sequences as lists. Dataclasses and other objects must be converted by the caller."""
    if isinstance(value, BaseModel):
        return canonical(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Sequence):
        return [canonical(v) for v in value]
    raise TypeError(f"cannot hash a {type(value).__name__} in a definition")


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of ``value``: sorted keys, no whitespace, floats as orjson writes them
    (shortest round-trip form, so ``0.6`` and ``0.60`` in a file give the same bytes)."""
    return orjson.dumps(canonical(value), option=orjson.OPT_SORT_KEYS)


def definition_hash(value: Any) -> str:
    """The version of a resolved definition: the first :data:`VERSION_CHARS` hex digits of the BLAKE2b
    of its canonical JSON. Sessions hash their resolved session definition with the same function."""
    return hashlib.blake2b(canonical_json(value), digest_size=VERSION_CHARS // 2).hexdigest()


def is_version(text: str) -> bool:
    return bool(VERSION_PATTERN.match(text))
