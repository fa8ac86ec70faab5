"""``streameval evaluate`` with sessions: the LLM spans of one OTLP trace (made by the real OpenTelemetry
SDK) grouped by trace id, and evaluation processes giving the same session results as one process."""

from __future__ import annotations

from pathlib import Path

import orjson
from _otel import export_json, gen_ai_span, openllmetry_span, record

from streameval.cli import main

SUITES = """\
inputs:
  - {topic: spans, format: otlp_json}
suites:
  - {name: s, default: true, evaluators: [{evaluator: contains, params: {value: 答}}]}
sessions:
  - name: run
    key: metadata.trace_id
    evaluators: [{evaluator: turn_scores}, {evaluator: thread_clean, weight: 0}]
"""


def test_llm_spans_of_a_trace_form_one_session(tmp_path: Path) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(SUITES, encoding="utf-8")
    lines = []
    for n in range(3):
        with record() as (tracer, finished):
            with tracer.start_as_current_span("agent run"):
                gen_ai_span(tracer, prompt="问", answer=f"答 {n}")
                openllmetry_span(tracer, prompt="q", answer="no")
            lines.append(export_json(finished()))
    source = tmp_path / "spans.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
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
    sessions = [orjson.loads(line) for line in (tmp_path / "out.sessions.jsonl").read_bytes().splitlines()]
    assert len(sessions) == 3
    by_trace = {r["id"].split("-")[0] for r in results}
    assert {s["key"] for s in sessions} == by_trace
    for session in sessions:
        assert len(session["turn_ids"]) == 2 and all(
            t.startswith(session["key"]) for t in session["turn_ids"]
        )
        assert session["metrics"]["score_mean"] == 0.5 and session["closed_by"] == "gap"


def test_evaluation_processes_give_the_same_sessions(tmp_path: Path) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(
        "suites: [{name: s, default: true, evaluators: [{evaluator: exact_match}]}]\n"
        "sessions: [{name: c, key: metadata.c, max_turns: 4}]\n"
    )
    events = [
        {
            "id": f"e{i}",
            "model": "m",
            "output": "a" if i % 3 else "b",
            "expected": "a",
            "timestamp": f"2026-11-21T10:{i // 60:02d}:{i % 60:02d}Z",
            "metadata": {"c": f"k{i % 7}"},
        }
        for i in range(300)
    ]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in events))
    found = []
    for processes in ("0", "2"):
        out = tmp_path / f"out{processes}.jsonl"
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
                    "--processes",
                    processes,
                    "--concurrency",
                    "16",
                    "--quiet",
                ]
            )
            == 0
        )
        skip = ("closed_at", "evaluated_at", "latency_ms")
        found.append(
            [
                {k: v for k, v in orjson.loads(x).items() if k not in skip}
                for x in (tmp_path / f"out{processes}.sessions.jsonl").read_bytes().splitlines()
            ]
        )
    assert len(found[0]) == 7 and found[0] == found[1]
    assert all(s["truncated"] and len(s["turn_ids"]) == 4 for s in found[0])


def test_code_evaluators_receive_the_transcript(tmp_path: Path) -> None:
    config = tmp_path / "suites.yaml"
    code = (
        "def evaluate(input, output, expected, metadata):\\n"
        "    turns = metadata['transcript']\\n"
        "    kept = sum(1 for t in turns if 'Ada' in t['output'])\\n"
        "    return {'passed': kept == len(turns), 'score': kept / len(turns), 'reason': str(len(turns))}\\n"
    )
    config.write_text(
        "suites: [{name: s, default: true, evaluators: [{evaluator: exact_match}]}]\n"
        f'sessions: [{{name: c, key: metadata.c, evaluators: [{{evaluator: code, params: {{language: python, code: "{code}"}}}}]}}]\n'
    )
    events = [
        {
            "id": f"e{i}",
            "model": "m",
            "output": "Hello Ada" if i else "Hi",
            "timestamp": f"2026-11-21T10:00:0{i}Z",
            "metadata": {"c": "k"},
        }
        for i in range(4)
    ]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in events))
    out = tmp_path / "out.jsonl"
    assert (
        main(["evaluate", "--config", str(config), "--input", str(source), "--output", str(out), "--quiet"])
        == 0
    )
    [session] = [orjson.loads(x) for x in (tmp_path / "out.sessions.jsonl").read_bytes().splitlines()]
    [code_result] = session["evaluators"]
    assert code_result["error"] is None, code_result
    assert (code_result["score"], code_result["reason"]) == (0.75, "4")
