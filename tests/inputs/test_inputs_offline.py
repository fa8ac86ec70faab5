"""``streameval evaluate --input-topic``: the offline pipeline over a file in an input's format."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from _otel import export_json, gen_ai_span, http_span, openllmetry_span, record

from streameval.cli import main

SUITES = """\
inputs:
  - {topic: spans, format: otlp_json}
  - {topic: spans.bin, format: otlp_proto}
  - topic: app
    format: json
    map: {id: $.rid, model: $.model, output: '$.choices[0].text'}
suites:
  - {name: s, default: true, evaluators: [{evaluator: contains, params: {value: 答}}]}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "suites.yaml"
    path.write_text(SUITES, encoding="utf-8")
    return path


def test_otlp_json_file(config: Path, tmp_path: Path) -> None:
    lines = []
    for n in range(3):
        with record() as (tracer, finished):
            gen_ai_span(tracer, prompt="问", answer=f"答 {n}")
            http_span(tracer)
            openllmetry_span(tracer, prompt="q", answer="no")
            lines.append(export_json(finished()))
    source = tmp_path / "spans.jsonl"
    source.write_bytes(b"\n".join([*lines, lines[0], b"{broken"]) + b"\n")  # a repeated export and a bad line
    out = tmp_path / "out.jsonl"
    code = main(
        [
            "evaluate",
            "--config",
            str(config),
            "--input",
            str(source),
            "--output",
            str(out),
            "--input-topic",
            "spans",
            "--quiet",
        ]
    )
    assert code == 0
    results = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(results) == 8 and len({r["id"] for r in results}) == 6  # the repeated export re-emits its 2
    assert [r["score"] for r in results[:2]] == [1.0, 0.0]
    [dead] = [orjson.loads(line) for line in (tmp_path / "out.deadletter.jsonl").read_bytes().splitlines()]
    assert dead["kind"] == "invalid_json" and dead["source"] == {
        "topic": "file:spans.jsonl",
        "partition": None,
        "offset": 5,
    }


def test_json_map_file(config: Path, tmp_path: Path) -> None:
    source = tmp_path / "app.jsonl"
    source.write_bytes(
        b'{"rid": 1, "model": "m", "choices": [{"text": "\xe7\xad\x94"}]}\n{"rid": 2, "model": "m", "choices": []}\n'
    )
    out = tmp_path / "out.jsonl"
    assert (
        main(
            [
                "evaluate",
                "--config",
                str(config),
                "--input",
                str(source),
                "--output",
                str(out),
                "--input-topic",
                "app",
                "--quiet",
            ]
        )
        == 0
    )
    [result] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert result["id"] == "1" and result["score"] == 1.0
    [dead] = [orjson.loads(line) for line in (tmp_path / "out.deadletter.jsonl").read_bytes().splitlines()]
    assert dead["kind"] == "schema" and "map.output: $.choices[0].text found nothing" in dead["reason"]


@pytest.mark.parametrize(
    ("topic", "words"), [("spans.bin", "otlp_proto is binary"), ("nope", "no input for that topic")]
)
def test_input_topic_errors(
    config: Path, tmp_path: Path, topic: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    code = main(
        [
            "evaluate",
            "--config",
            str(config),
            "--input",
            str(source),
            "--output",
            str(tmp_path / "o.jsonl"),
            "--input-topic",
            topic,
            "--quiet",
        ]
    )
    assert code == 2 and words in capsys.readouterr().err
