"""Turn a sandbox reply into a :class:`Score`, or a :class:`SandboxError` saying what was wrong.

The reply comes from untrusted code, so everything is checked: ``passed`` must be a boolean,
``score`` (optional) a finite number in [0, 1] (default: 1 when passed, else 0), ``reason`` a string,
``details`` an object; no other keys (a typo such as ``sore`` is an error, not a silent default).
"""

from __future__ import annotations

import math
from typing import Any

from .._util import clip
from ..evaluators._base import Score
from ._errors import SandboxError, SandboxTimeout

__all__ = ["RESULT_KEYS", "to_score"]

RESULT_KEYS = frozenset({"passed", "score", "reason", "details"})
_REASON_CHARS = 2000


def to_score(reply: Any) -> Score:
    if not isinstance(reply, dict):
        raise SandboxError("the sandbox sent a malformed reply")
    if "error" in reply:
        message = clip(str(reply.get("message") or reply["error"]), _REASON_CHARS)
        if reply["error"] == "timeout":
            raise SandboxTimeout(message)
        raise SandboxError(message)
    value = reply.get("ok")
    if not isinstance(value, dict):
        raise SandboxError(
            f"evaluate() must return an object {{passed, score?, reason?, details?}}, not {_kind(value)}"
        )
    unknown = sorted(set(value) - RESULT_KEYS)
    if unknown:
        raise SandboxError(
            f"evaluate() returned unknown key(s) {', '.join(map(repr, unknown))}; "
            "allowed: passed, score, reason, details"
        )
    passed = value.get("passed")
    if not isinstance(passed, bool):
        raise SandboxError(f"evaluate() must return a boolean 'passed', not {_kind(passed)}")
    score = value.get("score", 1.0 if passed else 0.0)
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise SandboxError(f"'score' must be a number in [0, 1], not {_kind(score)}")
    if not 0.0 <= score <= 1.0:
        raise SandboxError(f"'score' must be in [0, 1], got {score!r}")
    reason = value.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise SandboxError(f"'reason' must be a string, not {_kind(reason)}")
    details = value.get("details")
    if details is not None and not isinstance(details, dict):
        raise SandboxError(f"'details' must be an object, not {_kind(details)}")
    return Score(float(score), passed, clip(reason, _REASON_CHARS) if reason else reason, details)


def _kind(value: Any) -> str:
    return {type(None): "null", bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), f"a {type(value).__name__}"
    )
