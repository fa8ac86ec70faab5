"""What a feature adds to the web app (:class:`WebFeature`): the composition root builds it and hands it to
:func:`~streameval.api.create_web_app`, which serves its routes and puts its paths in the OpenAPI document;
the API itself imports no feature."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["WebFeature"]


@dataclass(frozen=True)
class WebFeature:
    """A feature's part of the web app: its routes, the path prefix whose requests its handlers authorize
    themselves (by :class:`~streameval.api._security.Identities`; None: the app's token rules, as for any
    read or write), its OpenAPI paths and where they go in the document (after the core path
    ``openapi_after``, after the paths of features given before it with the same one; None: at the end),
    what to close with the app, and the app keys its handlers read."""

    routes: Sequence[web.AbstractRouteDef]
    own_auth_prefix: str | None = None
    openapi_paths: dict[str, Any] = field(default_factory=dict)
    cleanup: Callable[[], Awaitable[None]] | None = None
    state: dict[Any, Any] = field(default_factory=dict)  #: app keys its handlers read
    openapi_after: str | None = None
    #: where ``GET /api/v1/results/{id}`` looks once no stored copy holds the result (the broker has it):
    #: ``(stats config, pairs searched, result id)`` -> a document, or None
    find_result: Callable[[Any, Sequence[str], str], Awaitable[dict[str, Any] | None]] | None = None
