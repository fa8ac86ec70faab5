"""Rule metrics over a whole session (conversation or agent run): they read the figures the session
closer puts in the thread event's ``metadata.session.metrics`` (streameval.features.sessions.thread).

* ``turn_scores``: the min, mean or last of the turns' own scores (``stat``).
* ``thread_clean``: the share of turns with no refusal, no error, no failed gate and no failed tool call.

The agent spec's ``collaboration_efficiency`` and ``adaptability`` work on a thread unchanged: its
``agent`` block has rounds = turns, time = duration, quality = the mean turn score, and one domain
score per turn.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..models import RequestEvent
from ._base import Evaluator, MissingField, Params, Score, register

__all__ = ["ThreadClean", "TurnScores", "session_metrics"]


def session_metrics(event: RequestEvent) -> dict[str, Any]:
    """The thread's figures, or :class:`MissingField` when ``event`` is not a session's thread."""
    session = event.metadata.get("session")
    metrics = session.get("metrics") if isinstance(session, dict) else None
    if not isinstance(metrics, dict):
        raise MissingField("not a session thread (no metadata.session.metrics); use it in a sessions: entry")
    return metrics


class TurnScoreParams(Params):
    stat: Literal["min", "mean", "last"] = Field(
        default="mean", description="which figure of the turns' scores"
    )
    threshold: float = Field(default=0.6, ge=0.0, le=1.0, description="pass at or above this score")


@register
class TurnScores(Evaluator):
    """The min, mean or last of a session's turn scores."""

    name = "turn_scores"
    summary = "a session's min, mean or last turn score"
    Params = TurnScoreParams
    params: TurnScoreParams

    def evaluate(self, event: RequestEvent) -> Score:
        metrics = session_metrics(event)
        value = float(metrics[f"score_{self.params.stat}"])
        return Score(
            value,
            value >= self.params.threshold,
            f"{self.params.stat} turn score {value:.3f} over {metrics['turns']} turn(s)",
        )


class CleanParams(Params):
    threshold: float = Field(
        default=1.0, ge=0.0, le=1.0, description="pass at or above this share of clean turns"
    )


@register
class ThreadClean(Evaluator):
    """The share of a session's turns without refusal, error, failed gate or failed tool call."""

    name = "thread_clean"
    summary = "share of a session's turns without refusal, error, gate failure or tool error"
    Params = CleanParams
    params: CleanParams

    def evaluate(self, event: RequestEvent) -> Score:
        metrics = session_metrics(event)
        kept = int(metrics["kept"]) or 1
        value = 1.0 - min(kept, int(metrics["unclean_turns"])) / kept
        reason = (
            f"{metrics['refusals']} refusal(s), {metrics['errors']} error(s), {metrics['gate_failures']} "
            f"gate failure(s), {metrics['tool_errors']} tool error(s) in {kept} turn(s)"
        )
        return Score(value, value >= self.params.threshold, reason)
