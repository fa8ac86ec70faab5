"""Each provider's request for an alert, as its documentation describes it (table-driven)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson
import pytest
from _notify_helpers import alert

from streameval.features.notify import ChannelConfig, Links, build_request, incident_key, sign
from streameval.features.notify._payloads import FIRING_HOLD_S
from streameval.models import AggregateSegment, parse_time

LINKS = Links("https://evals.example.com/")
NOW = 1_800_000_000.0


def channel(kind: str, **fields: Any) -> ChannelConfig:
    secrets = {
        "slack": {"url": "https://hooks.slack.com/services/T0/B0/xyz"},
        "pagerduty": {"routing_key": "R0UTING"},
        "opsgenie": {"api_key": "genie-key"},
        "webhook": {"url": "https://receiver.example.com/hook", "signing_secret": "s3cret"},
        "alertmanager": {"url": "http://am.example.com:9093"},
    }[kind]
    return ChannelConfig.model_validate({"name": f"c-{kind}", "kind": kind, **secrets, **fields})


def body(kind: str, status: str = "firing", links: Links = LINKS) -> tuple[str, dict[str, str], Any]:
    request = build_request(channel(kind), alert(status=status), links, clock=lambda: NOW)
    return request.url, dict(request.headers), orjson.loads(request.body)


@pytest.mark.parametrize(
    ("kind", "status", "url"),
    [
        ("slack", "firing", "https://hooks.slack.com/services/T0/B0/xyz"),
        ("pagerduty", "firing", "https://events.pagerduty.com/v2/enqueue"),
        ("pagerduty", "resolved", "https://events.pagerduty.com/v2/enqueue"),
        ("opsgenie", "firing", "https://api.opsgenie.com/v2/alerts"),
        (
            "opsgenie",
            "resolved",
            "https://api.opsgenie.com/v2/alerts/streameval%3Alow-mean%3A60%3Agpt-4o%3Aqa/close?identifierType=alias",
        ),
        ("webhook", "firing", "https://receiver.example.com/hook"),
        ("alertmanager", "resolved", "http://am.example.com:9093/api/v2/alerts"),
    ],
)
def test_each_kind_posts_to_its_documented_endpoint(kind: str, status: str, url: str) -> None:
    assert body(kind, status)[0] == url


def test_incident_key_is_stable_across_windows_and_the_resolve() -> None:
    first = alert()
    later = alert(id="low-mean:60:later:gpt-4o:qa", window=first.window.model_copy(update={"start": "x"}))
    resolve = alert(status="resolved")
    assert incident_key(first) == incident_key(later) == incident_key(resolve)
    assert incident_key(alert(model="other")) != incident_key(first)
    # detector alerts are an incident each; a key never passes PagerDuty's 255 characters
    shift = alert(rule="score_shift", metric="score_shift", id="score_shift:overall:60:w:m:s")
    assert incident_key(shift) == "streameval:score_shift:overall:60:w:m:s"
    assert len(incident_key(alert(model="m" * 400))) <= 255


def test_each_slice_of_a_rule_is_its_own_incident() -> None:
    gold = alert(segment=AggregateSegment(dimension="tier", value="gold"))
    free = alert(segment=AggregateSegment(dimension="tier", value="free"))
    assert incident_key(gold) == incident_key(alert(segment=gold.segment, status="resolved"))
    # a slice's resolve never ends another slice's incident, nor the pair's
    assert len({incident_key(gold), incident_key(free), incident_key(alert())}) == 3
    assert incident_key(gold).endswith(":tier=gold")
    # Alertmanager tells two slices' alerts apart by their labels
    request = build_request(channel("alertmanager"), gold, LINKS, clock=lambda: NOW)
    labels = orjson.loads(request.body)[0]["labels"]
    assert (labels["segment_dimension"], labels["segment_value"]) == ("tier", "gold")


@pytest.mark.parametrize(
    ("severity", "pagerduty", "opsgenie"),
    [("critical", "critical", "P1"), ("warning", "warning", "P3"), ("info", "info", "P5")],
)
def test_severity_is_mapped(severity: str, pagerduty: str, opsgenie: str) -> None:
    a = alert(severity=severity)
    pd = orjson.loads(build_request(channel("pagerduty"), a, LINKS, clock=lambda: NOW).body)
    og = orjson.loads(build_request(channel("opsgenie"), a, LINKS, clock=lambda: NOW).body)
    assert pd["payload"]["severity"] == pagerduty
    assert og["priority"] == opsgenie


def test_pagerduty_trigger_and_resolve() -> None:
    _, _, trigger = body("pagerduty")
    assert trigger["routing_key"] == "R0UTING" and trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == "streameval:low-mean:60:gpt-4o:qa"
    payload = trigger["payload"]
    assert {
        "summary",
        "source",
        "severity",
        "timestamp",
        "component",
        "group",
        "class",
        "custom_details",
    } <= set(payload)
    assert len(payload["summary"]) <= 1024
    assert payload["custom_details"]["value"] == 0.41 and payload["custom_details"]["threshold"] == 0.6
    assert payload["custom_details"]["examples"] == ["ev-1", "ev/2"]
    hrefs = [link["href"] for link in trigger["links"]]
    assert hrefs[0].startswith("https://evals.example.com/dashboard?model=gpt-4o&suite=qa&size=60&window=")
    assert "https://evals.example.com/api/v1/results/ev%2F2" in hrefs
    _, _, resolve = body("pagerduty", "resolved")
    assert resolve == {"routing_key": "R0UTING", "event_action": "resolve", "dedup_key": trigger["dedup_key"]}


def test_opsgenie_create_with_alias_and_close() -> None:
    _, headers, create = body("opsgenie")
    assert headers["Authorization"] == "GenieKey genie-key"
    assert create["alias"] == "streameval:low-mean:60:gpt-4o:qa"
    assert len(create["message"]) <= 130 and create["source"] == "streameval"
    assert all(isinstance(v, str) for v in create["details"].values())
    assert "https://evals.example.com/dashboard?" in create["description"]
    _, _, close = body("opsgenie", "resolved")
    assert close["source"] == "streameval"


def test_slack_blocks_say_rule_model_suite_value_window_examples_and_link() -> None:
    _, _, doc = body("slack")
    assert doc["text"].startswith("[FIRING] low-mean (critical)")
    assert [b["type"] for b in doc["blocks"]] == ["header", "section", "section", "section", "context"]
    fields = " ".join(f["text"] for f in doc["blocks"][2]["fields"])
    for needle in (
        "*Rule*\nlow-mean",
        "*Model*\ngpt-4o",
        "*Suite*\nqa",
        "mean_score 0.41 &lt; 0.6",
        "*Window*\n60 s",
    ):
        assert needle in fields
    examples = doc["blocks"][3]["text"]["text"]
    assert "<https://evals.example.com/api/v1/results/ev-1|ev-1>" in examples
    assert "Open this window in the dashboard" in doc["blocks"][4]["elements"][0]["text"]


def test_slack_escapes_markup_and_goes_without_links() -> None:
    request = build_request(
        channel("slack"), alert(model="<!channel> & co", examples=[]), Links(None), clock=lambda: NOW
    )
    doc = orjson.loads(request.body)
    # mrkdwn (the fallback text and every mrkdwn object) escapes it; the plain_text header shows it as is
    text = orjson.dumps([doc["text"], doc["blocks"][1:]]).decode()
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp; co" in text
    assert doc["blocks"][0]["text"]["type"] == "plain_text"
    assert "dashboard" not in text and [b["type"] for b in doc["blocks"]][-2] == "section"


def test_webhook_body_is_the_alert_and_the_signature_verifies() -> None:
    request = build_request(channel("webhook"), alert(), LINKS, clock=lambda: NOW)
    headers = dict(request.headers)
    assert orjson.loads(request.body)["id"] == alert().id
    assert headers["X-Streameval-Event"] == "firing"
    # the recipe of docs/notify.md
    parts = dict(p.split("=", 1) for p in headers["X-Streameval-Signature"].split(","))
    assert parts["t"] == str(int(NOW))
    expected = hmac.new(b"s3cret", parts["t"].encode() + b"." + request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected)
    assert sign("other", int(NOW), request.body) != headers["X-Streameval-Signature"]


def test_webhook_links_the_window_in_headers_a_receiver_can_follow() -> None:
    headers = dict(build_request(channel("webhook"), alert(), LINKS, clock=lambda: NOW).headers)
    dashboard = headers["X-Streameval-Dashboard"]
    assert dashboard == LINKS.window(alert())
    assert dashboard.startswith("https://evals.example.com/dashboard?model=gpt-4o&suite=qa&size=60&window=")
    assert headers["X-Streameval-Worst-Examples"].endswith("&kind=worst")
    bare = dict(build_request(channel("webhook"), alert(), Links(None), clock=lambda: NOW).headers)
    assert "X-Streameval-Dashboard" not in bare and "X-Streameval-Worst-Examples" not in bare


def test_alertmanager_labels_annotations_and_times() -> None:
    _, _, [firing] = body("alertmanager")
    assert firing["labels"] == {
        "alertname": "low-mean",
        "severity": "critical",
        "model": "gpt-4o",
        "suite": "qa",
        "rule": "low-mean",
        "source": "streameval",
    }
    assert firing["annotations"]["summary"].startswith("[FIRING]")
    assert firing["generatorURL"].startswith("https://evals.example.com/dashboard?")
    started = parse_time(firing["startsAt"])
    assert parse_time(firing["endsAt"]) - started == FIRING_HOLD_S
    _, _, [resolved] = body("alertmanager", "resolved")
    assert resolved["labels"] == firing["labels"]  # the same alert to Alertmanager: its fingerprint
    assert parse_time(resolved["endsAt"]) == NOW
    _, _, [bare] = body("alertmanager", links=Links(None))
    assert "generatorURL" not in bare


@pytest.mark.parametrize("kind", ["slack", "pagerduty", "opsgenie", "webhook", "alertmanager"])
def test_no_secret_is_in_a_body(kind: str) -> None:
    request = build_request(channel(kind), alert(), LINKS, clock=lambda: NOW)
    for secret in (b"s3cret", b"genie-key", b"xyz"):
        assert secret not in request.body
