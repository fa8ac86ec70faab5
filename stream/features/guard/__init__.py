"""Check before you send: a synchronous guardrail on the stream's own suites (docs/guard.md).

A suite with a ``guard:`` section (:class:`GuardConfig`) can be asked "may I send this answer?" over HTTP
(``POST /api/v1/check``): its evaluators run at once, within the section's deadline, and the result becomes a
decision (``allow``, ``warn``, ``block``, ``mask``) by :func:`decide`. The web parts (``_web``, ``_serve``)
and the checker (``_check``) sit on higher floors and are imported by the composition root only when a
suite file has a guard section; this package's root holds only the section and the decision rule.
"""

from __future__ import annotations

from ._config import Decision, GuardConfig, guard_issues, guard_section
from ._decide import Verdict, decide

__all__ = ["Decision", "GuardConfig", "Verdict", "decide", "guard_issues", "guard_section"]
