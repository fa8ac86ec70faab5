"""The command line's edges: help text, exit codes, one-line errors, suggestions, log summaries."""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streameval._cliargs import EXIT_CODES, _Formatter, build_parser
from streameval._logs import RepeatSummary
from streameval._util import unknown_name
from streameval.config import parse_config
from streameval.errors import BrokerUnavailable, ConfigError
from streameval.kafka_io import ensure_topics

DEAD = "127.0.0.1:1"  # nothing listens there


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streameval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(set(subcommands()) - {"judge-sim"}))
def test_every_command_has_a_description_and_every_option_help_and_default(name: str) -> None:
    parser = subcommands()[name]
    assert parser.description, f"{name} has no description"
    assert parser.epilog == EXIT_CODES
    formatter = _Formatter(prog="streameval")
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        text = formatter._get_help_string(action)
        assert text, f"{name} {action.option_strings or action.dest} has no help"
        if action.option_strings:
            assert "default" in text or "required" in text, f"{name} {action.option_strings}: {text!r}"


def test_help_lists_exit_codes() -> None:
    out = run_cli("--help").stdout
    assert "exit codes:" in out and "3    a Kafka broker or Redis could not be reached" in out
    assert "(default: 64)" in run_cli("evaluate", "--help").stdout


@pytest.mark.parametrize("command", [["produce", "-"], ["tail", "--topic", "t"]])
def test_no_broker_is_one_line_and_exit_3(command: list[str]) -> None:
    result = run_cli(*command, "--bootstrap", DEAD)
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"error: no Kafka broker answered at {re.escape(DEAD)} in \d+ s \(1 attempts\): .*connection refused; "
        r"is it running\? \(set KAFKA_BOOTSTRAP_SERVERS or pass --bootstrap\)",
        lines[0],
    ), lines[0]


def test_missing_redis_is_not_called_a_config_error(tmp_path: Path) -> None:
    result = run_cli(
        "worker", "--config", "examples/suites.yaml", env={"REDIS_URL": "", "KAFKA_BOOTSTRAP_SERVERS": DEAD}
    )
    assert result.returncode == 2
    assert "invalid configuration" not in result.stderr and "error: no Redis: set REDIS_URL" in result.stderr
    assert "Traceback" not in result.stderr


async def test_waiting_for_a_broker_summarises_and_gives_up_with_one_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(
        BrokerUnavailable, match=rf"no Kafka broker answered at {DEAD} in \d+ s \(\d+ attempts\)"
    ):
        await ensure_topics(DEAD, ["t"], timeout=1.0)


def test_repeat_summary_lets_one_through_then_a_summary() -> None:
    now = [0.0]
    summary = RepeatSummary(interval_s=30, clock=lambda: now[0])
    records = []
    for second in range(0, 61):
        now[0] = float(second)
        record = logging.LogRecord(
            "aiokafka", logging.ERROR, __file__, 1, 'Unable connect to "%s"', ("h",), None
        )
        if summary.filter(record):
            records.append((second, record.getMessage()))
    assert records == [
        (0, 'Unable connect to "h"'),
        (30, 'Unable connect to "h" (and 29 more like it in the last 30 s)'),
        (60, 'Unable connect to "h" (and 29 more like it in the last 30 s)'),
    ]
    info = logging.LogRecord("aiokafka", logging.INFO, __file__, 1, "joined", (), None)
    assert summary.filter(info) and summary.filter(info)  # below WARNING: untouched


@pytest.mark.parametrize(
    ("name", "known", "expected"),
    [
        ("token_f", ["token_f1", "bleu", "rouge_l"], "unknown evaluator 'token_f'; did you mean 'token_f1'?"),
        ("zzz", ["b", "a"], "unknown evaluator 'zzz'; valid evaluators: a, b"),
    ],
)
def test_unknown_name(name: str, known: list[str], expected: str) -> None:
    assert unknown_name("evaluator", name, known) == expected


def test_misspelt_evaluator_in_a_suite_gets_a_suggestion() -> None:
    with pytest.raises(
        ConfigError,
        match=r"suites\[0\]\.evaluators\[0\]\.evaluator: unknown evaluator 'token_f'; did you mean 'token_f1'\?",
    ):
        parse_config({"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "token_f"}]}]})


async def test_misspelt_suite_on_an_event_gets_a_suggestion() -> None:
    from streameval.pipeline import Pipeline

    _, suites = parse_config(
        {"suites": [{"name": "support", "evaluators": [{"evaluator": "contains", "params": {"value": "x"}}]}]}
    )
    outcome = await Pipeline(suites).process(b'{"id": "1", "model": "m", "output": "x", "suite": "suport"}')
    assert outcome.dead_letter is not None and "did you mean 'support'?" in outcome.dead_letter.reason


def test_produce_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("produce", str(tmp_path / "nope.jsonl"), "--bootstrap", DEAD)
    assert result.returncode == 2 and "no such file" in result.stderr


def test_regex_reason_shows_the_pattern_as_written() -> None:
    from streameval.evaluators import build_evaluator
    from streameval.models import RequestEvent

    evaluator = build_evaluator("regex", {"pattern": r"\bORD-\d{6}\b"})
    score = evaluator.evaluate(RequestEvent(id="1", model="m", output="no order"))
    assert score.reason == r"output does not match '\bORD-\d{6}\b'"


async def test_invalid_json_reason_says_it_once() -> None:
    from streameval.pipeline import Pipeline

    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    outcome = await Pipeline(suites).process(b'{"id": "1"')
    assert outcome.dead_letter is not None
    assert (
        outcome.dead_letter.reason.startswith("not valid JSON: ")
        and "Invalid JSON" not in outcome.dead_letter.reason
    )


@pytest.mark.parametrize(
    ("code_yaml", "file_line"),
    [
        (
            "code: |\n            def evaluate(i, o, e, m):\n                return {'passed': True}\n            x = (\n",
            11,
        ),
        ('code: "def evaluate(i, o, e, m): return 1\\nx = (\\n"\n', 8),
    ],
)
def test_python_syntax_error_is_reported_at_the_suite_file_line(
    tmp_path: Path, code_yaml: str, file_line: int
) -> None:
    from streameval.config import load_config

    path = tmp_path / "s.yaml"
    path.write_text(
        "suites:\n  - name: s\n    default: true\n    evaluators:\n      - evaluator: code\n        params:\n"
        "          language: python\n          " + code_yaml,
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (issue,) = info.value.issues
    assert issue.line == file_line, (issue, path.read_text().splitlines())
    assert "of the code)" in issue.message and not issue.message.startswith("Value error")


def test_aiokafka_module_loggers_are_summarised(caplog: pytest.LogCaptureFixture) -> None:
    from streameval._logs import install_repeat_summary

    install_repeat_summary()
    logger = logging.getLogger("aiokafka.consumer.fetcher")  # a child: the parent's filter would not see it
    with caplog.at_level(logging.ERROR, logger="aiokafka.consumer.fetcher"):
        for _ in range(50):
            logger.error("Failed fetch messages from %s: %s", 111, "NodeNotReadyError")
    assert len([r for r in caplog.records if r.name == "aiokafka.consumer.fetcher"]) == 1


def test_demo_with_an_unreachable_redis_is_one_line_and_exit_3() -> None:
    result = run_cli("demo", env={"REDIS_URL": "redis://127.0.0.1:1"})
    assert result.returncode == 3
    assert "error: Redis at redis://127.0.0.1:1 (REDIS_URL) did not answer" in result.stderr
    assert "Traceback" not in result.stderr and "broker" not in result.stderr  # nothing was started
