"""The worker's output topics, in one table: kind → topic setting → model and schema.

Everything else is derived from :data:`OUTPUTS`: the topics ``streameval worker`` creates, the Faust
app's output topics, :class:`Publish`'s ``kind``, the check that no input reads an output topic, and
the schema list (:mod:`streameval.schemas`). A new output topic takes a row and its setting here, its
model (:mod:`streameval.models`) with its JSON Schema (``schemas/``), and docs (docs/architecture.md).

Every message the worker publishes, a graded result from a batch or an aggregate from the window
closer, is a :class:`Publish` handed to one :data:`Send`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from .models import Aggregate, Alert, DeadLetter, GradedResult, ReviewItem, SessionResult

__all__ = ["OUTPUTS", "Kind", "Output", "OutputTopics", "Publish", "Send", "output_topics", "publish_all"]

#: What a published message is; one per row of :data:`OUTPUTS`.
Kind = Literal["result", "deadletter", "aggregate", "alert", "session", "review"]


class OutputTopics(BaseModel):
    """The output topics' settings (``STREAMEVAL_TOPIC_*``); :class:`streameval.settings.Settings` has them."""

    topic_results: str = Field(default="evals.results", description="graded results")
    topic_deadletter: str = Field(default="evals.deadletter", description="events that cannot be evaluated")
    topic_alerts: str = Field(default="evals.alerts", description="fired alert rules")
    topic_aggregates: str = Field(default="evals.aggregates", description="closed window aggregates")
    topic_sessions: str = Field(
        default="evals.sessions", description="graded sessions: conversations and agent runs"
    )
    topic_review: str = Field(
        default="evals.review", description="results worth a person's look (docs/feedback.md)"
    )


@dataclass(frozen=True)
class Output:
    """One output topic: its kind, the setting naming its topic, its model and its schema file."""

    kind: Kind
    setting: str  # a field of OutputTopics
    model: type[BaseModel]
    schema: str  # a file in schemas/

    @property
    def env(self) -> str:
        """The environment variable of the topic setting (``STREAMEVAL_TOPIC_RESULTS``)."""
        return f"STREAMEVAL_{self.setting.upper()}"


OUTPUTS: tuple[Output, ...] = (
    Output("result", "topic_results", GradedResult, "graded-result.v1.json"),
    Output("deadletter", "topic_deadletter", DeadLetter, "dead-letter.v1.json"),
    Output("aggregate", "topic_aggregates", Aggregate, "aggregate.v1.json"),
    Output("alert", "topic_alerts", Alert, "alert.v1.json"),
    Output("session", "topic_sessions", SessionResult, "session-result.v1.json"),
    Output("review", "topic_review", ReviewItem, "review-item.v1.json"),
)
assert tuple(o.kind for o in OUTPUTS) == get_args(Kind), "a kind without a row, or a row without a kind"


def output_topics(settings: OutputTopics) -> dict[Kind, str]:
    """Each kind's topic name under ``settings``."""
    return {o.kind: getattr(settings, o.setting) for o in OUTPUTS}


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to send to the topic of its ``kind``."""

    kind: Kind
    key: bytes | None
    value: bytes


Send = Callable[[Publish], Awaitable[Any]]
"""Hand one message to the producer. May return (after queueing it) an awaitable of its delivery, which
resolves once the broker acknowledged the message (or raises). ``None``: delivered already (tests' sinks).
:class:`streameval.inflight.InFlight` waits for it before acking a batch; everything published outside the
per-event path goes through :func:`publish_all`."""


async def publish_all(send: Send, messages: Iterable[Publish]) -> None:
    """Send ``messages`` and return only once the broker acknowledged every one of them.

    The one publish discipline of everything emitted outside the per-event path (window aggregates and
    alerts, session results, label dead letters): build -> ``publish_all`` -> only then mark done, forget or
    release. All messages are handed to the producer first and their deliveries awaited together, so a
    window of many pairs costs one round trip to the broker, not one per message. If a send or a delivery
    fails, this raises (a delivery's failure once every delivery has settled): the caller
    marks nothing done and a later try publishes the same messages again (at least once, same keys).
    """
    deliveries: list[asyncio.Future[Any]] = []
    for message in messages:
        delivery = await send(message)
        if delivery is not None and inspect.isawaitable(delivery):
            deliveries.append(asyncio.ensure_future(delivery))
    for outcome in await asyncio.gather(*deliveries, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
