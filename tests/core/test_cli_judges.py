"""``streameval evaluate`` with judges: the judge table, ``--max-judge-error-rate``, unwritable outputs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from streameval.cli import main


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """A simulated judge in its own process (the CLI runs its own event loop), keyed ``right-key``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streameval.judges.sim", "--port", "0", "--api-key", "right-key"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        assert match, line
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(10)


def _files(tmp_path: Path, url: str, key_env: str) -> tuple[Path, Path]:
    config = {
        "judges": [
            {
                "name": "gw-openai",
                "protocol": "openai",
                "base_url": f"{url}/v1",
                "model": "m1",
                "weight": 0.5,
                "api_key_env": key_env,
                "attempts": 1,
                "price_input_per_mtok": 3.0,
                "price_output_per_mtok": 15.0,
            },
            {
                "name": "gw-anthropic",
                "protocol": "anthropic",
                "base_url": url,
                "model": "m2",
                "weight": 0.5,
                "api_key_env": key_env,
                "attempts": 1,
            },
        ],
        "suites": [
            {
                "name": "s",
                "default": True,
                "evaluators": [{"evaluator": "exact_match"}],
                "judge": {"consistency_rate": 0},
            }
        ],
    }
    (tmp_path / "suites.yaml").write_text(yaml.safe_dump(config))
    events = [
        {"id": f"e{i}", "model": "m", "input": "q", "output": f"Paris {i}", "expected": "Paris"}
        for i in range(6)
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    return tmp_path / "suites.yaml", tmp_path / "in.jsonl"


def _evaluate(
    tmp_path: Path, url: str, key: str, *extra: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    os.environ["TEST_JUDGE_KEY"] = key
    try:
        config, events = _files(tmp_path, url, "TEST_JUDGE_KEY")
        code = main(
            [
                "evaluate",
                "--config",
                str(config),
                "--input",
                str(events),
                "--output",
                str(tmp_path / "out.jsonl"),
                *extra,
            ]
        )
    finally:
        del os.environ["TEST_JUDGE_KEY"]
    captured = capsys.readouterr()  # the summary on stdout, a failed gate on stderr
    return code, captured.out + captured.err


def test_a_wrong_key_shows_in_the_judge_table_and_fails_the_gate(
    tmp_path: Path, sim_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _evaluate(tmp_path, sim_url, "wrong-key", capsys=capsys)
    assert code == 0  # no gate asked for: the run itself succeeded, but it says what failed
    assert "judge gw-openai never answered" in err and "judge gw-anthropic never answered" in err
    row = next(line for line in err.splitlines() if "gw-openai" in line and "judge_auth" in line)
    assert "100.0%" in row
    code, err = _evaluate(tmp_path, sim_url, "wrong-key", "--max-judge-error-rate", "0.5", capsys=capsys)
    assert code == 1
    assert "FAIL judge gw-openai failed 100.0% of its answers" in err


def test_the_judge_table_counts_calls_tokens_and_cost(
    tmp_path: Path, sim_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _evaluate(tmp_path, sim_url, "right-key", "--max-judge-error-rate", "0", capsys=capsys)
    assert code == 0
    results = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    verdicts = [v for r in results for v in r["judge"]["judges"] if v["name"] == "gw-openai"]
    tokens_in = sum(v["prompt_tokens"] for v in verdicts)
    tokens_out = sum(v["completion_tokens"] for v in verdicts)
    cost = (tokens_in * 3.0 + tokens_out * 15.0) / 1e6
    row = next(line for line in err.splitlines() if "gw-openai" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[:6] == ["gw-openai", "6", "0", "6", "0", "0.0%"]
    assert cells[6:9] == [str(tokens_in), str(tokens_out), f"{cost:.4f}"]
    anthropic = next(line for line in err.splitlines() if "gw-anthropic" in line)
    assert [c.strip() for c in anthropic.split("│") if c.strip()][8] == "-"  # no prices: no cost


@pytest.mark.parametrize("where", ["missing/out.jsonl", "."])
def test_an_unwritable_output_is_exit_2_with_one_line(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    code = main(
        [
            "evaluate",
            "--config",
            str(examples / "suites.yaml"),
            "--input",
            str(examples / "events.jsonl"),
            "--output",
            str(tmp_path / where),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: --output") and "cannot write" in err
