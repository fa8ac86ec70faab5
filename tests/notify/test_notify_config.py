"""The suite file's notify: list: a bad channel fails at start with the path of its field, no secret shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streameval.config import parse_config_text
from streameval.errors import ConfigError
from streameval.features.notify import ChannelConfig

BASE = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
notify:
"""


def problems(channels: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config_text(BASE + channels, file="s.yaml")
    return [f"{i.path}: {i.message}" for i in info.value.issues]


@pytest.mark.parametrize(
    ("channels", "expected"),
    [
        ("  - {name: a, kind: pagerduty}\n", "notify[0].routing_key: kind pagerduty needs routing_key"),
        ("  - {name: a, kind: webhook, url: 'http://x'}\n", "notify[0].signing_secret: kind webhook needs"),
        (
            "  - {name: a, kind: slack}\n  - {name: b, kind: slack, url: 'nope-TOKEN'}\n",
            "notify[0].url: kind slack",
        ),
        (
            "  - {name: a, kind: slack, url: 'nope-TOKEN'}\n",
            "notify[0].url: must be an http:// or https:// URL",
        ),
        (
            "  - {name: a, kind: slack, url: 'http://h', url_file: /x}\n",
            "notify[0].url: give url or url_file",
        ),
        (
            "  - {name: a, kind: opsgenie, api_key_file: /nonexistent}\n",
            "notify[0].api_key_file: cannot read",
        ),
        (
            "  - {name: a, kind: opsgenie, api_key: k, routing_key: r}\n",
            "notify[0].routing_key: kind opsgenie does not use",
        ),
        (
            "  - {name: a, kind: slack, url: 'http://h'}\n  - {name: a, kind: slack, url: 'http://h'}\n",
            "notify[1].name: channel name 'a'",
        ),
        ("  - {name: a, kind: teams, url: 'http://h'}\n", "notify[0].kind: Input should be 'slack'"),
        (
            "  - {name: a, kind: slack, url: 'http://h', severity_at_least: high}\n",
            "notify[0].severity_at_least",
        ),
        ("  - {name: a, kind: slack, url: 'http://h', rate_per_min: 0}\n", "notify[0].rate_per_min"),
    ],
)
def test_a_bad_channel_names_its_field(channels: str, expected: str) -> None:
    found = problems(channels)
    assert any(p.startswith(expected) for p in found), found
    assert not any("TOKEN" in p for p in found)  # a URL may hold a token: never repeated


@pytest.mark.parametrize(
    "content", ["http//hooks.example.test/T0KEN2", "hooks.example.test/T0KEN2\n", "ftp://h/T0KEN2"]
)
def test_a_url_file_that_holds_no_url_names_its_field_not_its_content(tmp_path: Path, content: str) -> None:
    secret = tmp_path / "slack_url"
    secret.write_text(content)
    found = problems(f"  - {{name: a, kind: slack, url_file: {secret}}}\n")
    assert [p for p in found if p.startswith("notify[0].url_file: ")], found
    assert not any("T0KEN2" in p for p in found)


def test_check_reports_a_bad_url_file_at_start(tmp_path: Path) -> None:
    secret = tmp_path / "hook_url"
    secret.write_text("http//hooks.example.test/T0KEN2\n")
    config = tmp_path / "s.yaml"
    config.write_text(BASE + f"  - {{name: a, kind: slack, url_file: {secret}}}\n")
    result = subprocess.run(
        [sys.executable, "-m", "streameval", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "notify[0].url_file" in result.stderr
    assert "T0KEN2" not in result.stdout + result.stderr


def test_a_good_list_loads_and_reads_secret_files(tmp_path: Path) -> None:
    key = tmp_path / "pd"
    key.write_text("R0UTING\n")
    _, loaded = parse_config_text(
        BASE
        + f"  - {{name: pd, kind: pagerduty, routing_key_file: {key}, severity_at_least: warning}}\n"
        + "  - {name: s, kind: slack, url: 'https://hooks.slack.com/x', suites: ['q*'], rules: [low-*]}\n",
        file="s.yaml",
    )
    pd, slack = loaded.notify
    assert (
        pd.secret("routing_key") == "R0UTING" and pd.endpoint() == "https://events.pagerduty.com/v2/enqueue"
    )
    assert "R0UTING" not in repr(pd) and "hooks.slack.com" not in repr(slack)


def test_a_file_without_notify_costs_nothing() -> None:
    _, loaded = parse_config_text(BASE.replace("notify:\n", ""), file="s.yaml")
    assert loaded.notify == ()


@pytest.mark.parametrize(
    ("fields", "changes", "takes"),
    [
        ({}, {}, True),
        ({"severity_at_least": "critical"}, {"severity": "warning"}, False),
        ({"severity_at_least": "warning"}, {"severity": "critical"}, True),
        ({"rules": ["low-*"]}, {}, True),
        ({"rules": ["high-*"]}, {}, False),
        ({"metrics": ["pass_rate"]}, {}, False),
        ({"metrics": ["mean_score"]}, {}, True),
        ({"models": ["gpt-4*"], "suites": ["qa"]}, {}, True),
        ({"models": ["claude*"]}, {}, False),
        ({"suites": ["rag*"]}, {}, False),
    ],
)
def test_filters(fields: dict[str, object], changes: dict[str, object], takes: bool) -> None:
    from _notify_helpers import alert

    channel = ChannelConfig.model_validate({"name": "c", "kind": "slack", "url": "http://h", **fields})
    assert channel.takes(alert(**changes)) is takes
