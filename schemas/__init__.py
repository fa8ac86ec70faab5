"""JSON Schemas (2020-12) of streameval's wire contracts, shipped with the package.

Each schema has a pydantic model in ``streameval.models``; tests/schemas/test_contracts.py keeps them in step.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import orjson

from streameval.outputs import OUTPUTS

__all__ = ["NAMES", "load"]

#: the inputs' schemas (request events; human labels, docs/feedback.md), then one per output topic (streameval.outputs)
NAMES: dict[str, str] = {
    "request": "request-event.v1.json",
    "feedback": "feedback.v1.json",
    **{output.kind: output.schema for output in OUTPUTS},
}


@cache
def load(name: str) -> dict[str, Any]:
    """The schema document for a contract name (``request``, ``result``, ...) or file name."""
    filename = NAMES.get(name, name)
    if filename not in NAMES.values():
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(NAMES)}")
    doc: dict[str, Any] = orjson.loads(files(__name__).joinpath(filename).read_bytes())
    return doc
