"""Answers that carry no judgement: refusals, and answers only the parser's ``default`` stage read.

The multi-judge spec's parser gives every criterion the midpoint (3.0 on 1-5) when it finds no score. A judge
that refuses ("I am unable to evaluate this material") then looks like a lukewarm verdict inside a
panel marked ``ok``. :func:`unscored_kind` tells the panel which answers are like that, so the panel
is ``partial`` rather than ``ok``, and the suite's ``unscored`` option decides whether such an answer
counts as the midpoint (the multi-judge spec's behaviour, the default) or is left out of the panel score.

Refusals are recognised only in answers that were not read as JSON (stages ``regex``, ``default``
and ``number``): a judge that filled in the JSON shape judged, whatever its reasoning says. The
phrases are matched in the first :data:`SCAN_CHARS` characters, case-insensitively; they are fixed
alternations, so the match is linear in that prefix.
"""

from __future__ import annotations

import re
from typing import Literal

from ..models import JudgeVerdict

__all__ = ["REFUSAL_WARNING", "SCAN_CHARS", "UnscoredKind", "find_refusal", "is_text_stage", "unscored_kind"]

UnscoredKind = Literal["refusal", "default"]

#: the warning a refused answer carries (followed by the matched phrase)
REFUSAL_WARNING = "refusal: "
#: how much of an answer is scanned for a refusal phrase
SCAN_CHARS = 600
#: parse stages of answers that were not read as JSON
_TEXT_STAGES = frozenset({"regex", "default", "number"})

_REFUSAL = re.compile(
    r"\bI(?:'m| am| must| have to)? (?:unable|not able|not comfortable|cannot|can ?not|can't|can’t|won't|"
    r"will not|must decline|decline|refuse)\b[^.\n]{0,40}?\b(?:evaluat|assess|rat(?:e|ing)|scor|judg|grad|"
    r"review|help|assist|provide|comply|complete|fulfil)\w*"
    r"|\bI(?:'m| am) sorry,? but\b|\bI apologi[sz]e,? but\b|\bas an AI(?: language model)?\b[^.\n]{0,40}?"
    r"\b(?:cannot|can't|unable|not able)"
    r"|无法(?:评估|评价|评分|打分|完成|提供)|不能(?:评估|评价|评分|打分)|抱歉|拒绝(?:评估|评价|回答)",
    re.IGNORECASE,
)


def find_refusal(text: str) -> str | None:
    """The refusal phrase at the start of ``text``, or None."""
    match = _REFUSAL.search(text, 0, SCAN_CHARS)
    return match.group(0) if match else None


def unscored_kind(verdict: JudgeVerdict) -> UnscoredKind | None:
    """``refusal`` or ``default`` for an answered verdict that holds no judgement, else None."""
    if verdict.status != "ok":
        return None
    if any(w.startswith(REFUSAL_WARNING) for w in verdict.warnings):
        return "refusal"
    if verdict.parse == "default":
        return "default"
    return None


def is_text_stage(parse: str | None) -> bool:
    """Whether an answer read by ``parse`` may be a refusal (it was not read as JSON)."""
    return parse in _TEXT_STAGES
