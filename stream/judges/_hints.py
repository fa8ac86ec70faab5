"""Actionable messages for the two configuration mistakes real gateways made hard to see.

- A ``base_url`` ending in ``/v1`` when the protocol's path starts with ``v1/`` again (Anthropic appends
  ``/v1/messages``), so requests go to ``…/v1/v1/messages`` and the provider answers a bare 404.
- A gateway's 401/403 about *its own* upstream credential (the provider key the gateway holds), which
  is not about the key in our ``api_key_env`` variable. LiteLLM, for one, wraps the provider's refusal
  as ``litellm.AuthenticationError: AnthropicException - …`` while its own key check says "Invalid
  proxy server token" or "virtual key".

The body is only inspected, never quoted: a reason must not carry a provider payload.
"""

from __future__ import annotations

import re

import orjson

from ._config import JudgeConfig
from ._errors import JudgeAuthError, JudgeError, JudgeHTTPError
from ._protocols import protocol_of

__all__ = ["doubled_v1", "explain_status"]

_UPSTREAM = re.compile(r"litellm\.\w*AuthenticationError|\b\w+Exception - |\bupstream\b|\bprovider\b", re.I)
_OWN_KEY = re.compile(r"proxy server token|virtual key|no api key passed|token_not_found", re.I)
_MAX_BODY = 65536


def doubled_v1(cfg: JudgeConfig) -> bool:
    """Whether the judge's base_url ends in /v1 and its protocol's path starts with v1/ again
    (anthropic: requests would go to …/v1/v1/messages)."""
    return protocol_of(cfg).path.startswith("v1/") and cfg.base_url.rstrip("/").endswith("/v1")


def _error_text(body: bytes) -> str:
    try:
        doc = orjson.loads(body[:_MAX_BODY])
    except orjson.JSONDecodeError:
        return body[:_MAX_BODY].decode("utf-8", "replace")
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        return " ".join(str(error.get(k, "")) for k in ("message", "type", "code"))
    return str(error or doc)


def explain_status(cfg: JudgeConfig, status: int, body: bytes, error: JudgeError) -> JudgeError:
    """``error`` (from :func:`status_error`), or a copy with a message saying what to fix."""
    name, proto = cfg.name, protocol_of(cfg)
    if status == 404 and doubled_v1(cfg):
        return JudgeHTTPError(
            f"judge {name!r} answered HTTP 404: its base_url ends in /v1 and the {proto.name} protocol appends "
            f"/{proto.path}, so requests went to …/v1/{proto.path}; remove the trailing /v1 from base_url",
            status=status,
        )
    if status == 404 and proto.not_found_hint:
        return JudgeHTTPError(
            f"judge {name!r} answered HTTP 404 for {{base_url}}/{proto.path}; {proto.not_found_hint}",
            status=status,
        )
    if status in (401, 403):
        text = _error_text(body)
        if _UPSTREAM.search(text) and not _OWN_KEY.search(text):
            return JudgeAuthError(
                f"judge {name!r}: the gateway at base_url answered HTTP {status} about its own upstream "
                f"credential (the provider key it holds), not about the key in {cfg.api_key_env or 'api_key_env'}; "
                "fix the gateway's provider key",
                status=status,
            )
    return error
