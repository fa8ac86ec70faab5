"""Each provider's request for one alert, in the provider's documented format (docs/notify.md).

- Slack incoming webhook: ``text`` (the notification's fallback) and Block Kit ``blocks``;
- PagerDuty Events API v2: ``trigger`` / ``resolve`` with ``dedup_key`` = :func:`incident_key`;
- Opsgenie Alert API: create with ``alias`` = :func:`incident_key`, close by alias on resolve;
- webhook: the alert document itself, signed (:func:`sign`: HMAC-SHA256 over ``timestamp + "." + body``);
- Alertmanager ``POST /api/v2/alerts``: labels, annotations, ``startsAt``/``endsAt``, ``generatorURL``.

Pure functions of the alert, the channel and the clock: the delivery side only sends what they build.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from ...models import Alert, format_time, parse_time
from ._config import ChannelConfig

__all__ = [
    "DASHBOARD_HEADER",
    "FIRING_HOLD_S",
    "SIGNATURE_HEADER",
    "TEST_RULE",
    "WORST_HEADER",
    "HttpRequest",
    "Links",
    "build_request",
    "detector_alert",
    "incident_key",
    "sign",
    "webhook_link_headers",
]

#: the rule name of ``streameval notify test``'s notification
TEST_RULE = "streameval-test"
#: the webhook's signature header: ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">``
SIGNATURE_HEADER = "X-Streameval-Signature"
#: Alertmanager: a firing alert ends this long after it fired unless resolved first (nothing re-sends it)
FIRING_HOLD_S = 24 * 3600

_MAX_KEY = 255  # PagerDuty's dedup_key limit (Opsgenie's alias takes 512)
_DETECTORS = ("score_shift", "embedding_drift")  # detector alerts: one incident each


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One request to send: a POST of ``body`` to ``url`` with ``headers``."""

    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def detector_alert(alert: Alert) -> bool:
    """Whether the alert is a detector's (score shift, embedding drift): one incident per alert."""
    return alert.rule in _DETECTORS and alert.metric == alert.rule


def incident_key(alert: Alert) -> str:
    """The alert's stable key: the same for every window a rule fires on a model x suite (and slice: a rule
    with ``segments:``, each slice its own incident), and for its resolve (PagerDuty ``dedup_key``, Opsgenie
    ``alias``). Detector alerts (score shift, embedding drift) are one incident each (their id, which their
    resolve carries too)."""
    if detector_alert(alert):
        key = f"streameval:{alert.id}"
    else:
        key = f"streameval:{alert.rule}:{alert.window.size_s}:{alert.model}:{alert.suite}"
        if alert.segment is not None:
            key += f":{alert.segment.dimension}={alert.segment.value}"
    if len(key) > _MAX_KEY:
        key = "streameval:" + hashlib.sha256(key.encode()).hexdigest()[:48]
    return key


@dataclass(frozen=True, slots=True)
class Links:
    """Deep links into the dashboard and API served at ``public_url`` (``STREAMEVAL_PUBLIC_URL``)."""

    public_url: str | None

    def _query(self, alert: Alert) -> str:
        return urlencode(
            {
                "model": alert.model,
                "suite": alert.suite,
                "size": alert.window.size_s,
                "window": alert.window.start,
            }
        )

    def window(self, alert: Alert) -> str | None:
        """The dashboard's view of the alert's window of its model x suite."""
        if not self.public_url:
            return None
        return f"{self.public_url.rstrip('/')}/dashboard?{self._query(alert)}"

    def worst(self, alert: Alert) -> str | None:
        """The window's worst examples (``GET /api/v1/stats/examples``)."""
        if not self.public_url:
            return None
        return f"{self.public_url.rstrip('/')}/api/v1/stats/examples?{self._query(alert)}&kind=worst"

    def example(self, event_id: str) -> str | None:
        if not self.public_url:
            return None
        return f"{self.public_url.rstrip('/')}/api/v1/results/{quote(event_id, safe='')}"

    def all(self, alert: Alert) -> list[tuple[str, str]]:
        """(href, text) of every link of the alert, dashboard first."""
        out = []
        for href, text in (
            (self.window(alert), "dashboard: this window"),
            (self.worst(alert), "worst examples"),
        ):
            if href:
                out.append((href, text))
        for event_id in alert.examples:
            href = self.example(event_id)
            if href:
                out.append((href, f"example {event_id}"))
        return out


def _resolved(alert: Alert) -> bool:
    return alert.status == "resolved"


def _title(alert: Alert) -> str:
    state = "RESOLVED" if _resolved(alert) else "FIRING"
    test = "TEST " if alert.rule == TEST_RULE else ""
    return f"{test}[{state}] {alert.rule} ({alert.severity}): {alert.model} / {alert.suite}"


def _value(alert: Alert) -> str:
    return f"{alert.metric} {alert.value:.4g} {alert.comparator} {alert.threshold:g}"


def _slack_escape(text: str) -> str:
    # Slack reads & < > as markup (<!channel> would ping everyone)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(alert: Alert, links: Links) -> dict[str, Any]:
    """A Slack incoming webhook message: a header, the message, the figures, worst examples, links."""
    title = _title(alert)
    window = f"{alert.window.size_s} s from {alert.window.start}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _slack_escape(alert.message)[:3000]}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Rule*\n{_slack_escape(alert.rule)}"},
                {"type": "mrkdwn", "text": f"*Model*\n{_slack_escape(alert.model)}"},
                {"type": "mrkdwn", "text": f"*Suite*\n{_slack_escape(alert.suite)}"},
                {"type": "mrkdwn", "text": f"*Value vs threshold*\n{_slack_escape(_value(alert))}"},
                {"type": "mrkdwn", "text": f"*Window*\n{window} ({alert.count} events)"},
                {"type": "mrkdwn", "text": f"*Severity*\n{alert.severity}"},
            ],
        },
    ]
    if alert.examples:
        items = []
        for event_id in alert.examples:
            href = links.example(event_id)
            name = _slack_escape(event_id)
            items.append(f"<{href}|{name}>" if href else f"`{name}`")
        worst = links.worst(alert)
        head = f"<{worst}|Worst examples>" if worst else "Worst examples"
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{head}*: " + ", ".join(items)}}
        )
    footer = f"alert `{_slack_escape(alert.id)}`"
    dashboard = links.window(alert)
    if dashboard:
        footer = f"<{dashboard}|Open this window in the dashboard> · " + footer
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": footer[:3000]}]})
    return {"text": _slack_escape(f"{title}: {alert.message}")[:3000], "blocks": blocks}


_PD_SEVERITY = {"critical": "critical", "warning": "warning", "info": "info"}


def pagerduty_body(alert: Alert, routing_key: str, links: Links) -> dict[str, Any]:
    """A PagerDuty Events API v2 event: ``trigger`` with payload and links, or ``resolve``."""
    key = incident_key(alert)
    if _resolved(alert):
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": key}
    body: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": key,
        "payload": {
            "summary": f"{_title(alert)}: {alert.message}"[:1024],
            "source": f"streameval {alert.model} / {alert.suite}"[:255],
            "severity": _PD_SEVERITY[alert.severity],
            "timestamp": alert.fired_at,
            "component": alert.model,
            "group": alert.suite,
            "class": alert.metric,
            "custom_details": _details(alert),
        },
        "client": "streameval",
    }
    found = links.all(alert)
    if found:
        body["links"] = [{"href": href, "text": text} for href, text in found]
        body["client_url"] = found[0][0]
    return body


def _details(alert: Alert) -> dict[str, Any]:
    return {
        "alert_id": alert.id,
        "rule": alert.rule,
        "metric": alert.metric,
        "value": alert.value,
        "comparator": alert.comparator,
        "threshold": alert.threshold,
        "count": alert.count,
        "window": alert.window.model_dump(),
        "examples": alert.examples,
        "suite_version": alert.suite_version,
        "figures": alert.figures,
    }


_OG_PRIORITY = {"critical": "P1", "warning": "P3", "info": "P5"}


def opsgenie_request(alert: Alert, links: Links) -> tuple[str, dict[str, Any]]:
    """(path, body) of the Opsgenie Alert API call: create with ``alias``, or close by alias."""
    alias = incident_key(alert)
    if _resolved(alert):
        path = f"/v2/alerts/{quote(alias, safe='')}/close?identifierType=alias"
        return path, {"source": "streameval", "note": alert.message[:25000]}
    details = {
        k: v if isinstance(v, str) else orjson.dumps(v).decode()
        for k, v in _details(alert).items()
        if v is not None and v != {}
    }
    for href, text in links.all(alert):
        details[text] = href
    description = alert.message
    if links.window(alert):
        description += f"\n\nDashboard: {links.window(alert)}"
    body = {
        "message": _title(alert)[:130],
        "alias": alias,
        "description": description[:15000],
        "details": details,
        "entity": f"{alert.model} / {alert.suite}"[:512],
        "source": "streameval",
        "priority": _OG_PRIORITY[alert.severity],
        "tags": [t[:50] for t in (alert.rule, alert.severity, alert.model, alert.suite)],
    }
    return "/v2/alerts", body


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The webhook signature header's value: ``t=<timestamp>,v1=<hex HMAC-SHA256(secret, "t.body")>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


#: the webhook's links (with ``STREAMEVAL_PUBLIC_URL``): the dashboard's view of the window, its worst examples
DASHBOARD_HEADER = "X-Streameval-Dashboard"
WORST_HEADER = "X-Streameval-Worst-Examples"


def webhook_link_headers(alert: Alert, links: Links) -> tuple[tuple[str, str], ...]:
    """The webhook's link headers; none without a public URL. Not signed (the body is): a receiver that
    needs them signed builds them from the body's model, suite and window, as :class:`Links` does."""
    found = ((DASHBOARD_HEADER, links.window(alert)), (WORST_HEADER, links.worst(alert)))
    return tuple((name, href) for name, href in found if href)


def alertmanager_body(alert: Alert, links: Links, now: float) -> list[dict[str, Any]]:
    """One postable alert for ``POST /api/v2/alerts``; a resolve ends it (``endsAt`` = now)."""
    started = parse_time(alert.fired_at)
    ends = now if _resolved(alert) else started + FIRING_HOLD_S
    annotations = {
        "summary": _title(alert),
        "description": alert.message,
        "value": f"{alert.value:.6g}",
        "threshold": f"{alert.comparator} {alert.threshold:g}",
        "window": f"{alert.window.size_s}s from {alert.window.start}",
        "alert_id": alert.id,
    }
    if alert.examples:
        annotations["examples"] = ", ".join(alert.examples)
    if alert.resolution is not None:
        annotations["resolution"] = alert.resolution
    worst = links.worst(alert)
    if worst:
        annotations["worst_examples"] = worst
    doc: dict[str, Any] = {
        "labels": {
            "alertname": alert.rule,
            "severity": alert.severity,
            "model": alert.model,
            "suite": alert.suite,
            "rule": alert.rule,
            "source": "streameval",
            # a detector's alerts are one incident each: Alertmanager tells them apart by their labels
            **({"incident": incident_key(alert)} if detector_alert(alert) else {}),
            # and a slice's alert is its slice's (docs/segments.md)
            **(
                {"segment_dimension": alert.segment.dimension, "segment_value": alert.segment.value}
                if alert.segment is not None
                else {}
            ),
        },
        "annotations": annotations,
        "startsAt": format_time(min(started, ends)),
        "endsAt": format_time(ends),
    }
    dashboard = links.window(alert)
    if dashboard:
        doc["generatorURL"] = dashboard
    return [doc]


_JSON = ("Content-Type", "application/json")


def build_request(
    channel: ChannelConfig, alert: Alert, links: Links, *, clock: Callable[[], float]
) -> HttpRequest:
    """The request that delivers ``alert`` to ``channel`` (secrets read now, from their files if any)."""
    kind = channel.kind
    if kind == "slack":
        return HttpRequest(channel.endpoint(), (_JSON,), orjson.dumps(slack_body(alert, links)))
    if kind == "pagerduty":
        key = channel.secret("routing_key") or ""
        return HttpRequest(channel.endpoint(), (_JSON,), orjson.dumps(pagerduty_body(alert, key, links)))
    if kind == "opsgenie":
        path, doc = opsgenie_request(alert, links)
        auth = ("Authorization", f"GenieKey {channel.secret('api_key') or ''}")
        return HttpRequest(channel.endpoint().rstrip("/") + path, (_JSON, auth), orjson.dumps(doc))
    if kind == "webhook":
        body = alert.model_dump_json().encode()
        signature = sign(channel.secret("signing_secret") or "", int(clock()), body)
        event = "test" if alert.rule == TEST_RULE else alert.status
        headers = (
            _JSON,
            (SIGNATURE_HEADER, signature),
            ("X-Streameval-Event", event),
            ("X-Streameval-Incident", quote(incident_key(alert), safe=":/@._-")),
            *webhook_link_headers(alert, links),
        )
        return HttpRequest(channel.endpoint(), headers, body)
    url = channel.endpoint().rstrip("/") + "/api/v2/alerts"
    return HttpRequest(url, (_JSON,), orjson.dumps(alertmanager_body(alert, links, clock())))
