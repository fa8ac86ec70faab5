"""Shared helpers of the guard tests (not a test module)."""

from __future__ import annotations

from typing import Any

import orjson

from streameval.config import parse_config
from streameval.features.guard._check import Guard

CARD_FREE = r"^(?!.*\b\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}\b)"


def guard_of(suites: list[dict[str, Any]], **top: Any) -> Guard:
    _, loaded = parse_config({"suites": suites, **top})
    return Guard(loaded)


def raw(output: str, **fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "output": output, **fields})
