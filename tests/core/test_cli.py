"""The command line: offline evaluate, check, and clear errors with exit code 2 for bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from streameval.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


def test_evaluate_writes_results_and_dead_letters(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    code = main(
        [
            "evaluate",
            "--config",
            str(EXAMPLES / "suites.yaml"),
            "--input",
            str(EXAMPLES / "events.jsonl"),
            "--output",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    lines = [line for line in (EXAMPLES / "events.jsonl").read_bytes().splitlines() if line.strip()]
    results = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    dead = [orjson.loads(x) for x in (tmp_path / "results.deadletter.jsonl").read_bytes().splitlines()]
    assert len(results) + len(dead) == len(lines)  # nothing lost
    assert all(d["source"]["topic"] == "file:events.jsonl" and d["source"]["offset"] >= 1 for d in dead)
    ids = [r["id"] for r in results]
    duplicated = {i for i in ids if ids.count(i) > 1}
    assert duplicated, "the example file carries a redelivered event"
    for event_id in duplicated:  # a repeated id re-emits the first result, byte for byte
        assert len({orjson.dumps(r) for r in results if r["id"] == event_id}) == 1


def test_evaluate_in_processes_writes_the_same_results(tmp_path: Path) -> None:
    # examples/suites.yaml has rule-only suites (evaluated in the processes) and none with judges; the
    # same file in one process and in two evaluation processes gives the same results, in the same order
    outputs = []
    for processes in ("0", "2"):
        out = tmp_path / f"results-{processes}.jsonl"
        code = main(
            [
                "evaluate",
                "--config",
                str(EXAMPLES / "suites.yaml"),
                "--input",
                str(EXAMPLES / "events.jsonl"),
                "--output",
                str(out),
                "--quiet",
                "--concurrency",
                "16",
                "--processes",
                processes,
            ]
        )
        assert code == 0
        docs = [orjson.loads(x) for x in out.read_bytes().splitlines()]
        for doc in docs:
            doc.pop("evaluated_at"), doc.pop("latency_ms"), doc.pop("event_time")
        dead = [
            orjson.loads(x)["kind"]
            for x in out.with_name(out.stem + ".deadletter.jsonl").read_bytes().splitlines()
        ]
        outputs.append((docs, dead))
    assert outputs[0] == outputs[1]
    assert len(outputs[0][0]) > 200 and len(outputs[0][1]) == 6


@pytest.mark.parametrize(("threshold", "code"), [(0.0, 0), (0.99, 1)])
def test_fail_under_gates_on_the_mean_score(tmp_path: Path, threshold: float, code: int) -> None:
    args = [
        "evaluate",
        "--config",
        str(EXAMPLES / "suites.yaml"),
        "--input",
        str(EXAMPLES / "events.jsonl"),
        "--output",
        str(tmp_path / "o.jsonl"),
        "--quiet",
        "--fail-under",
        str(threshold),
    ]
    assert main(args) == code


def test_max_dead_letters_gate(tmp_path: Path) -> None:
    args = [
        "evaluate",
        "--config",
        str(EXAMPLES / "suites.yaml"),
        "--input",
        str(EXAMPLES / "events.jsonl"),
        "--output",
        str(tmp_path / "o.jsonl"),
        "--quiet",
        "--max-dead-letters",
        "0",
    ]
    assert main(args) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-under", "7"], "--fail-under must be within [0, 1]"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--processes", "-1"], "--processes must be 0 or more"),
    ],
)
def test_bad_evaluate_options(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli(
        "evaluate",
        "--config",
        str(EXAMPLES / "suites.yaml"),
        "--input",
        str(EXAMPLES / "events.jsonl"),
        "--output",
        str(tmp_path / "o.jsonl"),
        *args,
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_missing_input_file(tmp_path: Path) -> None:
    result = run_cli(
        "evaluate",
        "--config",
        str(EXAMPLES / "suites.yaml"),
        "--input",
        str(tmp_path / "nope.jsonl"),
        "--output",
        str(tmp_path / "o.jsonl"),
    )
    assert result.returncode == 2 and "no such file" in result.stderr


def test_bad_config_exits_2_with_the_field_path(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text(
        "suites:\n  - name: a\n    evaluators:\n      - {evaluator: similarity, params: {threshold: 3}}\n"
    )
    result = run_cli("check", str(config))
    assert result.returncode == 2
    assert f"{config}:4: suites[0].evaluators[0].params.threshold" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_lists_suites() -> None:
    result = run_cli("check", str(EXAMPLES / "suites.yaml"))
    assert result.returncode == 0
    assert "OK (5 suites)" in result.stdout and "states_answer×1" in result.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STREAMEVAL_CONFIG": "", "REDIS_URL": "redis://127.0.0.1:1"}, "no suite config"),
        ({"STREAMEVAL_CONFIG": str(EXAMPLES / "suites.yaml"), "REDIS_URL": ""}, "no Redis"),
        (
            {"STREAMEVAL_CONFIG": "/nonexistent.yaml", "REDIS_URL": "redis://127.0.0.1:1"},
            "/nonexistent.yaml: <root>: cannot read",
        ),
        (
            {
                "STREAMEVAL_CONFIG": str(EXAMPLES / "suites.yaml"),
                "REDIS_URL": "redis://x",
                "STREAMEVAL_WINDOWS": "0",
            },
            "STREAMEVAL_WINDOWS",
        ),
    ],
)
def test_worker_misconfiguration_fails_before_connecting(env: dict[str, str], message: str) -> None:
    # The bootstrap address is unreachable: the worker must fail on config before trying it.
    result = run_cli("worker", env={"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", **env}, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr
