"""The suite file's ``notify:`` list: where alerts are delivered, and which ones (docs/notify.md).

.. code-block:: yaml

    notify:
      - name: oncall
        kind: pagerduty            # slack | pagerduty | opsgenie | webhook | alertmanager
        routing_key_file: /run/secrets/pd_key
        severity_at_least: critical
        suites: ["qa*"]
        rate_per_min: 30           # at most this many requests a minute to this channel
        max_attempts: 8            # then the notification becomes a dead letter
        max_retry_s: 600

Secrets (``url``, ``routing_key``, ``api_key``, ``signing_secret``) are given inline or as ``*_file``
(read when used, so a rotated file is picked up); they are never logged nor repeated in an error.
Checked at start: :func:`notify_issues` gives each problem with the path of its field (``notify[1].url``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ...models import Alert
from ...secrets import check_secret_file, read_secret, read_secret_file

__all__ = [
    "KINDS",
    "SECRETS",
    "SEVERITY_ORDER",
    "ChannelConfig",
    "ChannelKind",
    "notify_issues",
]

ChannelKind = Literal["slack", "pagerduty", "opsgenie", "webhook", "alertmanager"]
KINDS: tuple[ChannelKind, ...] = ("slack", "pagerduty", "opsgenie", "webhook", "alertmanager")
Severity = Literal["info", "warning", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

#: the secret fields of a channel, each also given as ``{name}_file``
SECRETS = ("url", "routing_key", "api_key", "signing_secret")

#: what each kind needs (one of the field or its ``_file``), and the endpoint it has without ``url``
_NEEDS: dict[str, tuple[str, ...]] = {
    "slack": ("url",),
    "pagerduty": ("routing_key",),
    "opsgenie": ("api_key",),
    "webhook": ("url", "signing_secret"),
    "alertmanager": ("url",),
}
DEFAULT_URLS: dict[str, str] = {
    "pagerduty": "https://events.pagerduty.com/v2/enqueue",
    "opsgenie": "https://api.opsgenie.com",
}


class ChannelConfig(BaseModel):
    """One ``notify:`` entry: a channel, its secrets, which alerts it takes and its delivery limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="unique channel name"
    )
    kind: ChannelKind = Field(description="slack, pagerduty, opsgenie, webhook or alertmanager")
    url: SecretStr | None = Field(
        default=None,
        description="slack: the incoming webhook URL; webhook: the receiver; alertmanager: its base URL; "
        "pagerduty/opsgenie: another API endpoint (EU regions, a proxy)",
    )
    url_file: str | None = Field(default=None, description="a file holding url")
    routing_key: SecretStr | None = Field(
        default=None, description="pagerduty: the integration's routing key"
    )
    routing_key_file: str | None = Field(default=None, description="a file holding routing_key")
    api_key: SecretStr | None = Field(default=None, description="opsgenie: the API integration's key")
    api_key_file: str | None = Field(default=None, description="a file holding api_key")
    signing_secret: SecretStr | None = Field(
        default=None, description="webhook: the HMAC-SHA256 key of the signature header"
    )
    signing_secret_file: str | None = Field(default=None, description="a file holding signing_secret")
    rules: list[str] | None = Field(
        default=None, min_length=1, description="alert rule names (globs); none: all"
    )
    metrics: list[str] | None = Field(default=None, min_length=1, description="alert metrics; none: all")
    severity_at_least: Severity = Field(default="info", description="the lowest severity taken")
    models: list[str] | None = Field(default=None, min_length=1, description="model globs; none: all")
    suites: list[str] | None = Field(default=None, min_length=1, description="suite globs; none: all")
    rate_per_min: float | None = Field(
        default=None, gt=0, description="at most this many requests a minute to the channel; none: no limit"
    )
    max_attempts: int = Field(default=8, ge=1, le=100, description="attempts before a dead letter")
    max_retry_s: float = Field(
        default=600.0, gt=0, description="seconds after the first attempt before a dead letter"
    )
    timeout_s: float = Field(default=10.0, gt=0, le=300, description="one attempt's timeout")

    def takes(self, alert: Alert) -> bool:
        """Whether this channel's filters take ``alert`` (its rule, metric, severity, model and suite)."""
        if SEVERITY_ORDER[alert.severity] < SEVERITY_ORDER[self.severity_at_least]:
            return False
        return (
            _glob(alert.rule, self.rules)
            and (self.metrics is None or alert.metric in self.metrics)
            and _glob(alert.model, self.models)
            and _glob(alert.suite, self.suites)
        )

    def secret(self, name: str) -> str | None:
        """The secret ``name`` (one of :data:`SECRETS`), from its file when one is given."""
        value: SecretStr | None = getattr(self, name)
        return read_secret(value, getattr(self, f"{name}_file"))

    def endpoint(self) -> str:
        """The URL requests go to (the kind's documented endpoint unless ``url`` replaces it)."""
        return self.secret("url") or DEFAULT_URLS[self.kind]


def _glob(value: str, patterns: Sequence[str] | None) -> bool:
    return patterns is None or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an endpoint, without repeating it (it may hold a token)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host (the value is not shown: it may be secret)"
    return None


def notify_issues(channels: Sequence[ChannelConfig]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each problem of the ``notify:`` list as (path, message): repeated names, a secret given twice or
    missing, an unreadable ``*_file``, a URL that is not one. Messages never contain a secret."""
    seen: set[str] = set()
    for i, channel in enumerate(channels):
        at: tuple[str | int, ...] = ("notify", i)
        if channel.name in seen:
            yield (*at, "name"), f"channel name {channel.name!r} is used twice; names must be unique"
        seen.add(channel.name)
        for name in SECRETS:
            inline, path = getattr(channel, name), getattr(channel, f"{name}_file")
            if inline is not None and path is not None:
                yield (*at, name), f"give {name} or {name}_file, not both"
            if path is not None:
                try:
                    check_secret_file(path)
                except ValueError as exc:
                    yield (*at, f"{name}_file"), str(exc)
                else:
                    if name == "url" and _url_problem(read_secret_file(path)) is not None:
                        yield (
                            (*at, "url_file"),
                            (
                                f"{path} must hold an http:// or https:// URL with a host (its content is not "
                                "shown: it may be secret)"
                            ),
                        )
        for name in _NEEDS[channel.kind]:
            if getattr(channel, name) is None and getattr(channel, f"{name}_file") is None:
                yield (*at, name), f"kind {channel.kind} needs {name} (or {name}_file)"
        if channel.url is not None:
            problem = _url_problem(channel.url.get_secret_value())
            if problem is not None:
                yield (*at, "url"), problem
        unused = [
            n
            for n in SECRETS
            if n not in _NEEDS[channel.kind]
            and n != "url"
            and (getattr(channel, n) is not None or getattr(channel, f"{n}_file") is not None)
        ]
        for name in unused:
            yield (*at, name), f"kind {channel.kind} does not use {name}"
