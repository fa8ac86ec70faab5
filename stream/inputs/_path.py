"""The small path language of a ``json`` input's ``map:``: ``$.a.b[0]``, ``$.msgs[-1].content``, ``$['a b']``.

A path is ``$`` followed by steps: ``.name`` (letters, digits, ``_`` and ``-``), ``['any key']`` or
``["any key"]``, and ``[N]`` (an array index; negative counts from the end). Nothing else: no
wildcards, filters or recursive descent, so a lookup is one step per segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MISSING", "Path", "compile_path"]

#: what :meth:`Path.find` returns when the document has nothing at the path
MISSING: Final = object()

_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z_][A-Za-z0-9_\-]*)
      | \[(?P<index>-?\d+)\]
      | \['(?P<single>(?:[^'\\]|\\.)*)'\]
      | \["(?P<double>(?:[^"\\]|\\.)*)"\]""",
    re.VERBOSE,
)
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True, slots=True)
class Path:
    text: str
    steps: tuple[str | int, ...]

    def find(self, document: Any) -> Any:
        """The value at this path in ``document``, or :data:`MISSING`."""
        node = document
        for step in self.steps:
            if isinstance(step, str):
                if not isinstance(node, dict) or step not in node:
                    return MISSING
                node = node[step]
            else:
                if not isinstance(node, list) or not -len(node) <= step < len(node):
                    return MISSING
                node = node[step]
        return node

    def __str__(self) -> str:
        return self.text


def compile_path(text: str) -> Path:
    """Parse ``text``; raises ``ValueError`` saying where the path stops making sense."""
    if not text.startswith("$"):
        raise ValueError(f"path {text!r} must start with '$' (e.g. $.output or $.choices[0].text)")
    steps: list[str | int] = []
    at = 1
    while at < len(text):
        match = _STEP.match(text, at)
        if match is None:
            raise ValueError(
                f"path {text!r}: cannot read {text[at : at + 20]!r} at character {at + 1}; "
                "steps are .name, ['key'] or [index]"
            )
        if match["name"] is not None:
            steps.append(match["name"])
        elif match["index"] is not None:
            steps.append(int(match["index"]))
        else:
            quoted = match["single"] if match["single"] is not None else match["double"]
            steps.append(_ESCAPE.sub(r"\1", quoted))
        at = match.end()
    return Path(text, tuple(steps))
