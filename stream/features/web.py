"""The features' parts of the web app that every web app serves, whatever its suite file: the dashboard's
reads of what the features keep (drill-down examples, version comparison and quality per cost, budgets, agreement with people, slices). An API
process may read what workers with another configuration recorded, so these do not follow
:func:`streameval.features.setup.enabled`; a read of something nobody keeps answers empty. The review page
is built apart (streameval.features.review_page.web: only when it is on)."""

from __future__ import annotations

from ..api import WebFeature
from .compare.web import compare_feature
from .drilldown.web import examples_feature
from .labels.web import human_feature
from .segments.web import segments_feature
from .usage.web import budgets_feature

__all__ = ["dashboard_features"]


def dashboard_features(compare_ttl_s: int | None = None) -> list[WebFeature]:
    """The reads, in their order in the OpenAPI document (``compare_ttl_s``: ``STREAMEVAL_COMPARE_TTL_S``,
    None when unset)."""
    return [
        examples_feature(),
        compare_feature(compare_ttl_s),
        budgets_feature(),
        human_feature(),
        segments_feature(),
    ]
