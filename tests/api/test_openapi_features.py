"""The OpenAPI document composed of the core's paths and the web features' (streameval.api.WebFeature): the
features' dashboard reads keep the place they had when the core served them, so the document is the same
for the same configuration."""

from __future__ import annotations

from streameval.api import WebFeature, openapi_document
from streameval.features.review_page._openapi import PATHS as REVIEW_PATHS
from streameval.features.web import dashboard_features

CORE = [
    "/api/v1/evaluators",
    "/api/v1/evaluators/presets",
    "/api/v1/evaluators/{id}",
    "/api/v1/evaluators/{id}/test",
    "/api/v1/stats/pairs",
    "/api/v1/stats/windows",
    "/api/v1/stats/deadletters",
    "/api/v1/results/{id}",
    "/api/v1/alerts",
]
READS = [
    "/api/v1/stats/examples",
    "/api/v1/stats/compare",
    "/api/v1/stats/compare/models",
    "/api/v1/stats/budgets",
    "/api/v1/stats/human",
    "/api/v1/stats/segments",
]


def test_the_core_document_names_no_feature_path() -> None:
    assert list(openapi_document()["paths"]) == CORE


def test_the_features_reads_follow_the_dead_letters_in_their_order() -> None:
    paths = list(openapi_document(dashboard_features())["paths"])
    at = CORE.index("/api/v1/stats/deadletters") + 1
    assert paths == [*CORE[:at], *READS, *CORE[at:]]


def test_a_feature_without_an_anchor_or_with_an_unknown_one_goes_at_the_end() -> None:
    review = WebFeature([], "/api/v1/review/", REVIEW_PATHS)
    lost = WebFeature([], openapi_paths={"/api/v1/lost": {}}, openapi_after="/api/v1/nowhere")
    paths = list(openapi_document([*dashboard_features(), review, lost])["paths"])
    assert paths[: len(CORE) + len(READS)] == list(openapi_document(dashboard_features())["paths"])
    assert paths[len(CORE) + len(READS) :] == [*REVIEW_PATHS, "/api/v1/lost"]
