"""Human labels (docs/feedback.md): the record side. Each judged result's verdicts are kept for the label join
in the batch's pipeline (LabelStore.verdict_calls), only when labels are configured: the
suite file's ``feedback:`` or ``review:`` section, a ``human_agreement`` alert rule, or an explicit
``STREAMEVAL_LABEL_JOIN_TTL_S``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded
from ._store import LabelStore

__all__ = ["VerdictRecorder"]


class VerdictRecorder:
    """Keeps the verdicts of every recorded result for ``labels``' join (other slots: no record-call block)."""

    name = "label-join verdicts"
    lua = ""

    def __init__(self, labels: LabelStore) -> None:
        self.labels = labels

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        return self.labels.verdict_calls([(e.pair, e.result) for e in events if e.result is not None], now)

    def block(
        self,
        ctx: RecordContext,
        pair: str,
        group: Sequence[Recorded],
        targets: Sequence[tuple[int, int]],
        now: float,
    ) -> Block | None:
        return None

    def committed(self, token: Any) -> None:
        pass
