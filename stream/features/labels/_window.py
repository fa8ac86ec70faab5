"""The window closer's label-agreement step: each published window's aggregates carry the agreement of the
labels that arrived in it (``human``; docs/feedback.md), read for every pair in one call, and the live
versions' figures set the ``streameval_human_agreement`` gauges. Alert rules on ``human_agreement`` read it
off the aggregate (streameval.alerts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import telemetry
from ...feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from ...outputs import Send
from ._store import LabelStore

__all__ = ["AgreementStep"]


class AgreementStep:
    """The closer's step of the label join (built when labels are joined on the stream)."""

    name = "label agreement"

    def __init__(self, labels: LabelStore) -> None:
        self.labels = labels

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        """Each pair's ``human`` figures: the labels joined in this window (one read for every pair)."""
        if not window.pairs:
            return {}
        human = await self.labels.agreement(list(window.pairs), window.size, window.start)
        for pair in window.pairs:
            agreement = human.get(pair)
            _, suite, version = ctx.store.keys.split_pair(pair)
            if agreement is not None and ctx.live(suite, version):  # the gauges show the live versions
                telemetry.observe_human_agreement(
                    suite,
                    {
                        rater: {
                            **{
                                f: getattr(a, f)
                                for f in ("kappa", "alpha", "pearson", "spearman", "mae", "bias")
                            },
                            "n": float(a.n),
                        }
                        for rater, a in agreement.raters.items()
                    },
                )
        return {pair: {"human": agreement} for pair, agreement in human.items() if agreement is not None}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        return None

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        pass
