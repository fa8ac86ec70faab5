"""Paths into a request event (a session's ``key`` and ``end``), in the ``json`` input's path language.

``metadata.conversation_id`` and ``$.metadata.conversation_id`` are the same path: the leading ``$.``
is optional here. Steps go through the event's fields (``metadata``, ``agent.results[0].domain``, ...)
and into the dictionaries and lists below them; parsing is :func:`streameval.inputs._path.compile_path`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ...inputs._path import MISSING, compile_path

__all__ = ["MISSING", "EventPath", "compile_event_path"]


@dataclass(frozen=True, slots=True)
class EventPath:
    text: str
    steps: tuple[str | int, ...]

    def find(self, event: BaseModel) -> Any:
        """The value at this path in ``event`` (a model, its dicts and lists), or :data:`MISSING`."""
        node: Any = event
        for step in self.steps:
            if type(node) is dict and type(step) is str:  # the common step, at its cheapest
                node = node.get(step)
                if node is None:  # absent, or null
                    return MISSING
                continue
            if isinstance(node, BaseModel):
                if not isinstance(step, str) or step not in type(node).__pydantic_fields__:
                    return MISSING
                node = getattr(node, step)
            elif isinstance(step, str):
                if not isinstance(node, dict) or step not in node:
                    return MISSING
                node = node[step]
            else:
                if not isinstance(node, list) or not -len(node) <= step < len(node):
                    return MISSING
                node = node[step]
            if node is None:
                return MISSING
        return node

    def __str__(self) -> str:
        return self.text


def compile_event_path(text: str) -> EventPath:
    """Parse ``text`` (``a.b[0]`` or ``$.a.b[0]``); raises ``ValueError`` saying what is wrong."""
    rooted = text if text.startswith("$") else "$" + (text if text.startswith("[") else "." + text)
    try:
        path = compile_path(rooted)
    except ValueError as exc:  # say it in the user's own spelling of the path
        shift = len(rooted) - len(text)
        message = str(exc).replace(repr(rooted), repr(text))
        raise ValueError(
            re.sub(r"at character (\d+)", lambda m: f"at character {int(m[1]) - shift}", message)
        ) from None
    if not path.steps:
        raise ValueError(f"path {text!r} names the whole event; name a field, e.g. metadata.conversation_id")
    return EventPath(text, path.steps)
