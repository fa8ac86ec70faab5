"""HTTP hardening: security headers on every answer, the bearer-token check, and who may read.

Every response (pages, static files, API answers, errors) carries a Content-Security-Policy that
allows only this origin's own scripts and styles (the pages have no inline script, handler or style
attribute), forbids framing, and is sent with ``nosniff``, ``Referrer-Policy: no-referrer`` and a
``Server`` header without versions. Writes always need the token; with ``STREAMEVAL_API_READ_AUTH``
the API reads need it too, ``/health`` and ``/metrics`` each by their own setting, and ``/ready``
answers its status to anyone but its per-check details only with the token (probes keep working).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from aiohttp import web

from ._errors import Forbidden, Unauthorized

__all__ = [
    "HEADERS",
    "IDENTITIES_KEY",
    "READY_DETAILS_KEY",
    "Access",
    "Identities",
    "add_security_headers",
    "authorize",
    "details_allowed",
    "needs_token",
    "token_given",
]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Server": "streameval",
}
_WRITES = frozenset({"POST", "PUT", "DELETE", "PATCH"})


@dataclass(frozen=True)
class Access:
    """Which requests need the bearer token besides writes (streameval.api._settings)."""

    reads: bool = False  #: every /api/ read, and /ready's details
    health: bool = False  #: /health
    metrics: bool = False  #: /metrics


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare`` hook: runs for every answer, static files and errors included."""
    response.headers.update(HEADERS)


def needs_token(request: web.Request, access: Access) -> bool:
    path = request.path
    if path.startswith("/api/"):
        return request.method in _WRITES or access.reads
    if path == "/health":
        return access.health
    if path == "/metrics":
        return access.metrics
    return False


@dataclass(frozen=True)
class Identities:
    """Named tokens: who sends a request (the review page's annotator is the name of the token it carries).

    ``STREAMEVAL_API_TOKEN`` is named ``STREAMEVAL_API_TOKEN_NAME``; the reviewers' tokens (one per person,
    good for the review endpoints only) come from ``STREAMEVAL_REVIEW_TOKENS_FILE``."""

    tokens: tuple[tuple[str, str], ...] = ()  #: (name, token)

    def name_of(self, request: web.Request) -> str | None:
        """The name of the request's bearer token; every token is compared (constant time each)."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        try:
            given_bytes = given.strip().encode("utf-8")
        except UnicodeEncodeError:
            return None
        found = None
        for name, token in self.tokens:
            if hmac.compare_digest(given_bytes, token.encode("utf-8")) and found is None:
                found = name
        return found if scheme.lower() == "bearer" else None

    def require(self, request: web.Request) -> str:
        """The request's name, or :class:`Forbidden` (no named token configured) / :class:`Unauthorized`."""
        if not self.tokens:
            raise Forbidden(
                "the review endpoints need named tokens: STREAMEVAL_API_TOKEN or STREAMEVAL_REVIEW_TOKENS_FILE"
            )
        name = self.name_of(request)
        if name is None:
            raise Unauthorized("a valid 'Authorization: Bearer <token>' header is required: it names you")
        return name


#: the app's :class:`Identities`
IDENTITIES_KEY: web.AppKey[Identities] = web.AppKey("identities", Identities)


def token_given(request: web.Request, token: str | None) -> bool:
    """True when the request's ``Authorization: Bearer`` header matches ``token`` (constant time).

    Header bytes that are not valid text (aiohttp hands them over as surrogate escapes) never match."""
    if not token:
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    try:
        given_bytes = given.strip().encode("utf-8")
    except UnicodeEncodeError:
        return False
    return scheme.lower() == "bearer" and hmac.compare_digest(given_bytes, token.encode("utf-8"))


def authorize(request: web.Request, token: str | None) -> None:
    """Raise :class:`Forbidden` without a configured token, :class:`Unauthorized` for a missing or wrong one."""
    if not token:
        if request.method in _WRITES:
            raise Forbidden("writes are disabled: the server has no STREAMEVAL_API_TOKEN")
        raise Forbidden("reads need a token but the server has no STREAMEVAL_API_TOKEN")
    if not token_given(request, token):
        what = "writes" if request.method in _WRITES else "this endpoint"
        raise Unauthorized(f"a valid 'Authorization: Bearer <token>' header is required for {what}")


#: a predicate on the request: may ``/ready`` show each check's verdict?
READY_DETAILS_KEY: web.AppKey[object] = web.AppKey("ready_details", object)


def details_allowed(token: str | None, reads_need_token: bool) -> object:
    """``/ready``'s details (judge names, errors) for everyone, or only with the token when reads need it."""
    if not reads_need_token:
        return lambda request: True
    return lambda request: token_given(request, token)
