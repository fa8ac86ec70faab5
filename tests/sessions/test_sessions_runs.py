"""Agent runs (``assemble: spans``): the spans of one trace, made by the real OpenTelemetry SDK, become one
run: its LLM spans are evaluated as events and are the run's scored turns, its tool spans, its
sub-agents' spans, its LLM calls that answered with tool calls only (plan steps) and its root span are
steps (never evaluated), the thread holds them in time order with a failing tool call, the rule metrics
count the failure, and the root span's end closes the run, online as offline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from _otel import LONG_ARGUMENT, PLANNED, agent_trace, export_json, export_proto, gen_ai_span, record

from streameval.batch import evaluate_items
from streameval.cli import main
from streameval.config import parse_config
from streameval.envelope import Source
from streameval.features.sessions.step import AppendTurns
from streameval.features.sessions.thread import thread_event
from streameval.features.sessions.turns import TOOL_TEXT, text_limit, turns_in
from streameval.features.setup import annotators
from streameval.inputs import Inputs
from streameval.pipeline import Pipeline

SUITES: dict[str, Any] = {
    "inputs": [{"topic": "spans", "format": "otlp_proto"}, {"topic": "spans.json", "format": "otlp_json"}],
    "suites": [
        {
            "name": "llm",
            "default": True,
            "evaluators": [{"evaluator": "contains", "params": {"value": "巴黎"}}],
        }
    ],
    "sessions": [
        {
            "name": "runs",
            "key": "metadata.trace_id",
            "assemble": "spans",
            "category": "agent",
            "evaluators": [{"evaluator": "turn_scores"}, {"evaluator": "thread_clean", "weight": 0}],
        }
    ],
}


def _export(fmt: str, plan: str | None = None) -> tuple[bytes, str]:
    with record() as (tracer, finished):
        agent_trace(tracer, plan=plan)
        spans = finished()
    trace_id = f"{spans[0].context.trace_id:032x}"
    return (export_proto(spans) if fmt == "proto" else export_json(spans)), trace_id


@pytest.mark.parametrize("fmt", ["proto", "json"])
def test_tool_and_root_spans_are_steps_only_with_a_spans_session(fmt: str) -> None:
    raw, trace_id = _export(fmt)
    _, suites = parse_config(SUITES)
    topic = "spans" if fmt == "proto" else "spans.json"
    plain = Inputs(suites.inputs).expand([(raw, Source(topic, 0, 0))])
    assert [item.step for item in plain] == [False, False]  # without steps: the LLM spans only, as before
    items = Inputs(suites.inputs, steps=suites.assembles_spans).expand([(raw, Source(topic, 0, 0))])
    assert all(item.error is None for item in items)
    docs = [orjson.loads(item.raw) for item in items]
    assert [(item.step, d.get("kind"), d.get("name")) for item, d in zip(items, docs, strict=True)] == [
        (False, None, None),
        (True, "tool", "get_weather"),
        (True, "tool", "book_hotel"),
        (False, None, None),
        (True, "root", "travel"),
    ]
    weather, hotel, root = docs[1], docs[2], docs[4]
    assert (
        weather["error"] is None and weather["result"] == "晴, 21°C" and LONG_ARGUMENT in weather["arguments"]
    )
    assert hotel["error"] == "no rooms left" and hotel["result"] is None  # the exception event's message
    assert root["root"] is True and root["error"] is None
    assert all(d["metadata"]["trace_id"] == trace_id for d in docs)


@pytest.mark.parametrize("fmt", ["proto", "json"])
async def test_the_run_holds_its_steps_in_time_order_with_the_failed_tool(fmt: str) -> None:
    raw, trace_id = _export(fmt)
    _, suites = parse_config(SUITES)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    items = Inputs(suites.inputs, steps=True).expand(
        [(raw, Source("spans" if fmt == "proto" else "spans.json", 0, 0))]
    )
    outcomes = await evaluate_items(pipeline, items)
    # the LLM spans are evaluated as events; the steps are not (no result, no dead letter), only turns
    assert [o.result is not None for o in outcomes] == [True, False, False, True, False]
    assert all(o.dead_letter is None for o in outcomes)
    turns = [t for o in outcomes for t in turns_in(o.annotations)]
    assert {t.key for t in turns} == {trace_id} and [t.end for t in turns] == [
        False,
        False,
        False,
        False,
        True,
    ]
    records = [orjson.loads(t.payload) for t in sorted(turns, key=lambda t: t.time)]
    assert [r.get("step") for r in records] == [None, "tool", "tool", None, "end"]
    event, metrics = thread_event("runs", trace_id, "agent", 0, records, len(records))
    lines = [line for line in event.output.splitlines() if line.startswith("### turn")]
    assert lines[0] == "### turn 1 - user" and lines[1] == "### turn 1 - assistant"
    assert lines[2].startswith('### turn 2 - tool call get_weather({"city": "Paris", "note": "xxx')
    assert lines[2].endswith("…) -> 晴, 21°C")  # arguments clipped to TOOL_TEXT characters
    assert len(records[1]["tools"][0]["arguments"]) == TOOL_TEXT
    assert lines[3] == '### turn 3 - tool call book_hotel({"city": "Paris"}) failed: no rooms left'
    assert lines[4:] == ["### turn 4 - user", "### turn 4 - assistant", "### turn 5 - the run ended (travel)"]
    assert "gpt-4o" not in event.output  # blind mode: the judges never read the model's name
    assert event.input is not None and event.input.startswith("An agent run of 5 step(s)")
    assert event.model == "gpt-4o-2024-08-06"
    assert (metrics["tool_calls"], metrics["tool_errors"], metrics["steps"], metrics["unclean_turns"]) == (
        2,
        1,
        3,
        1,
    )
    assert (metrics["turns"], metrics["score_mean"], metrics["errors"]) == (5, 0.5, 0)
    assert len(event.agent.results) == 2  # type: ignore[union-attr]  # the scored turns: the two LLM calls


def test_streameval_evaluate_closes_the_run_on_its_root_span(tmp_path: Path) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(json.dumps(SUITES, ensure_ascii=False), encoding="utf-8")
    lines, traces = [], []
    for _ in range(2):
        raw, trace_id = _export("json")
        lines.append(raw)
        traces.append(trace_id)
    source = tmp_path / "spans.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
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
                "spans.json",
                "--quiet",
            ]
        )
        == 0
    )
    results = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(results) == 4 and {r["suite"] for r in results} == {"llm"}  # steps are never evaluated events
    runs = [orjson.loads(line) for line in (tmp_path / "out.sessions.jsonl").read_bytes().splitlines()]
    assert sorted(r["key"] for r in runs) == sorted(traces)
    for run in runs:
        assert run["closed_by"] == "end" and run["models"] == ["gpt-4o-2024-08-06"]
        assert len(run["turn_ids"]) == 5 and run["turn_ids"][-1] == f"{run['key']}-{run['turn_ids'][-1][33:]}"
        metrics = run["metrics"]
        assert (metrics["tool_calls"], metrics["tool_errors"], metrics["steps"]) == (2, 1, 3)
        clean = next(e for e in run["evaluators"] if e["name"] == "thread_clean")
        assert clean["score"] == pytest.approx(4 / 5) and run["score"] == 0.5  # one answer lacks 巴黎


async def test_evaluation_processes_decode_the_steps_the_same_way() -> None:
    """With evaluation processes (they decode OTLP exports too) a run's steps give the same turns."""
    import yaml

    from streameval.batch import evaluate_messages
    from streameval.config import parse_config_text
    from streameval.evalpool import EvalPool

    raw, _ = _export("proto")
    planned, _ = _export("proto", plan="openinference")  # a plan step, decoded in the process too
    text = yaml.safe_dump(SUITES, allow_unicode=True)
    _, suites = parse_config_text(text)
    inputs, pipeline = Inputs(suites.inputs, steps=True), Pipeline(suites, annotators=annotators(suites))
    batch = [(raw, Source("spans", 0, 0)), (planned, Source("spans", 0, 1))]
    _, here = await evaluate_messages(pipeline, inputs, batch)
    pool = EvalPool(text, "<test>", 1, max_event_bytes=1 << 20, max_event_depth=64, annotate=annotators)
    await pool.start()
    try:
        _, there = await evaluate_messages(pipeline, inputs, batch, pool)
    finally:
        await pool.close()
    assert [t for o in there for t in turns_in(o.annotations)] == [
        t for o in here for t in turns_in(o.annotations)
    ]
    # the first trace: answer, tools, answer, end; the second: its plan step, tools, answer, end
    answered = [False, True, True, False, True]
    assert [o.result is None for o in there] == [*answered, True, *answered[1:]]
    assert all(o.dead_letter is None for o in there)


def test_a_trace_without_llm_spans_gives_no_run_result(tmp_path: Path) -> None:
    """A trace of a root span and a tool span only (no LLM call) has nothing to judge: no run result."""
    config = tmp_path / "suites.yaml"
    config.write_text(json.dumps(SUITES, ensure_ascii=False), encoding="utf-8")
    with record() as (tracer, finished):
        with tracer.start_as_current_span("GET /health"):
            with tracer.start_as_current_span(
                "execute_tool ping",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ping"},
            ):
                pass
        quiet = export_json(finished())
    raw, trace_id = _export("json")
    source = tmp_path / "spans.jsonl"
    source.write_bytes(quiet + b"\n" + raw + b"\n")
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
                "spans.json",
                "--quiet",
            ]
        )
        == 0
    )
    runs = [orjson.loads(line) for line in (tmp_path / "out.sessions.jsonl").read_bytes().splitlines()]
    assert [r["key"] for r in runs] == [trace_id]


def test_a_step_without_an_end_time_is_placed_when_it_arrived() -> None:
    _, suites = parse_config(SUITES)
    pipeline = Pipeline(suites, annotators=annotators(suites), clock=lambda: 1_800_000_000.25)
    step = {
        "id": "t-s",
        "kind": "tool",
        "name": "ping",
        "t": 0.0,
        "root": False,
        "error": None,
        "metadata": {"trace_id": "ab" * 16},
        "arguments": None,
        "result": "pong",
    }
    [turn] = pipeline.step(orjson.dumps(step), Source()).annotations["turns"]
    assert (turn.key, turn.time, turn.end) == ("ab" * 16, 1_800_000_000.25, False)
    assert orjson.loads(turn.payload)["tools"] == [{"name": "ping", "result": "pong", "error": None}]


def test_a_plan_step_keeps_its_calls_clipped_as_tool_calls_are() -> None:
    _, suites = parse_config(SUITES)
    step = {
        "id": "t-p",
        "kind": "plan",
        "name": "chat gpt-4o",
        "t": 1_800_000_000.5,
        "root": True,  # a root LLM span: its own end step (another item) carries the end marker
        "error": None,
        "model": "gpt-4o-2024-08-06",
        "input": "问" * 200_000,
        "calls": [{"name": f"t{i}", "arguments": LONG_ARGUMENT} for i in range(30)] + [{"name": None}],
        "metadata": {"trace_id": "ab" * 16},
    }
    [turn] = (
        Pipeline(suites, annotators=annotators(suites))
        .step(orjson.dumps(step), Source())
        .annotations["turns"]
    )
    record = orjson.loads(turn.payload)
    assert (turn.end, record["step"], record["score"], record["model"]) == (
        False,
        "plan",
        None,
        "gpt-4o-2024-08-06",
    )
    assert len(record["calls"]) == 20 and all(len(c["arguments"]) == TOOL_TEXT for c in record["calls"])
    assert len(record["input"]) == text_limit(1 << 20) and record["input"].endswith("…")  # as an LLM turn's


def _sub_agent_trace(tracer: Any, convention: str) -> None:
    """A root agent that hands the research to a sub-agent (one that fails in the second run), under
    each convention's marker of an agent span."""
    from opentelemetry.trace import Status, StatusCode

    markers = {
        "gen_ai": {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "researcher",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "巴黎明天的天气"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "晴, 21°C"}]}]
            ),
        },
        "openinference": {
            "openinference.span.kind": "AGENT",
            "input.value": "巴黎明天的天气",
            "output.value": "晴, 21°C",
        },
        "openllmetry": {
            "traceloop.span.kind": "agent",
            "traceloop.entity.input": "巴黎明天的天气",
            "traceloop.entity.output": "晴, 21°C",
        },
    }[convention]
    with tracer.start_as_current_span(
        "invoke_agent travel",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
    ):
        gen_ai_span(tracer, prompt="明天巴黎天气如何?", answer="我请研究员查一下。")
        time.sleep(0.003)
        with tracer.start_as_current_span("invoke_agent researcher", attributes=markers):
            time.sleep(0.003)
        time.sleep(0.003)
        with tracer.start_as_current_span(
            "invoke_agent researcher",
            attributes={**markers, "output.value": "", "traceloop.entity.output": ""},
        ) as span:
            span.set_status(Status(StatusCode.ERROR, "researcher timed out"))
        time.sleep(0.003)
        gen_ai_span(tracer, prompt="结果?", answer="明天巴黎晴, 21°C。")
        time.sleep(0.003)


@pytest.mark.parametrize("convention", ["gen_ai", "openinference", "openllmetry"])
async def test_a_sub_agent_below_the_root_is_a_step_of_the_run(convention: str) -> None:
    with record() as (tracer, finished):
        _sub_agent_trace(tracer, convention)
        spans = finished()
    raw = export_proto(spans)
    _, suites = parse_config(SUITES)
    items = Inputs(suites.inputs, steps=True).expand([(raw, Source("spans", 0, 0))])
    docs = [orjson.loads(item.raw) for item in items if item.step]
    assert [(d["kind"], d["name"]) for d in docs] == [
        ("agent", "researcher" if convention == "gen_ai" else "invoke_agent researcher"),
        ("agent", "researcher" if convention == "gen_ai" else "invoke_agent researcher"),
        ("root", "travel"),
    ]
    assert docs[0]["arguments"] == "巴黎明天的天气" and docs[0]["result"] == "晴, 21°C"
    assert docs[1]["error"] == "researcher timed out"
    outcomes = await evaluate_items(Pipeline(suites, annotators=annotators(suites)), items)
    assert [o.result is not None for o in outcomes] == [True, False, False, True, False]  # never an event
    records = [
        orjson.loads(t.payload)
        for t in sorted((t for o in outcomes for t in turns_in(o.annotations)), key=lambda t: t.time)
    ]
    assert [r.get("step") for r in records] == [None, "agent", "agent", None, "end"]
    trace_id = f"{spans[0].context.trace_id:032x}"
    event, metrics = thread_event("runs", trace_id, "agent", 0, records, len(records))
    lines = [line for line in event.output.splitlines() if line.startswith("### turn")]
    name = docs[0]["name"]
    assert lines[2] == f"### turn 2 - sub-agent {name}(巴黎明天的天气) -> 晴, 21°C"
    assert lines[3] == f"### turn 3 - sub-agent {name}(巴黎明天的天气) failed: researcher timed out"
    assert lines[-1] == "### turn 5 - the run ended (travel)"
    # a sub-agent is called as a tool is: it counts in the run's calls and their errors
    assert (metrics["tool_calls"], metrics["tool_errors"], metrics["steps"], metrics["errors"]) == (
        2,
        1,
        3,
        0,
    )


#: the conventions of an LLM call answering with tool calls only (tests/_otel.py tool_calls_span)
PLANS = ["gen_ai", "span_events", "openllmetry", "openinference"]


def _asked(convention: str) -> str:
    """How the thread shows PLANNED: GenAI's structured arguments are written as compact JSON, the
    others' JSON text as the instrumentation wrote it."""
    if convention == "gen_ai":
        return 'get_weather({"city":"Paris"}), book_hotel({"city":"Paris"})'
    return 'get_weather({"city": "Paris"}), book_hotel({"city": "Paris"})'


@pytest.mark.parametrize("convention", PLANS)
async def test_an_llm_call_answering_with_tool_calls_only_is_a_plan_step_of_the_run(convention: str) -> None:
    raw, trace_id = _export("proto", plan=convention)
    _, suites = parse_config(SUITES)
    items = Inputs(suites.inputs, steps=True).expand([(raw, Source("spans", 0, 0))])
    assert all(item.error is None for item in items)  # not a dead letter any more
    docs = [orjson.loads(item.raw) for item in items]
    assert [(item.step, d.get("kind")) for item, d in zip(items, docs, strict=True)] == [
        (True, "plan"),
        (True, "tool"),
        (True, "tool"),
        (False, None),
        (True, "root"),
    ]
    plan = docs[0]
    assert [c["name"] for c in plan["calls"]] == [name for name, _ in PLANNED]
    assert plan["input"] == "明天巴黎天气如何?顺便订酒店。" and plan["model"].startswith("gpt-4o")
    assert plan["id"] == f"{trace_id}-{plan['metadata']['span_id']}" and plan["root"] is False

    outcomes = await evaluate_items(Pipeline(suites, annotators=annotators(suites)), items)
    assert [o.result is not None for o in outcomes] == [False, False, False, True, False]
    assert all(o.dead_letter is None for o in outcomes)
    turns = [t for o in outcomes for t in turns_in(o.annotations)]
    assert [t.end for t in turns] == [False, False, False, False, True]  # the root's end step only
    records = [orjson.loads(t.payload) for t in sorted(turns, key=lambda t: t.time)]
    assert [r.get("step") for r in records] == ["plan", "tool", "tool", None, "end"]
    assert records[0]["score"] is None and "tools" not in records[0]
    event, metrics = thread_event("runs", trace_id, "agent", 0, records, len(records))
    lines = [line for line in event.output.splitlines() if line.startswith("### turn")]
    assert lines[:2] == ["### turn 1 - user", f"### turn 1 - assistant asked for {_asked(convention)}"]
    assert lines[2].startswith("### turn 2 - tool call get_weather(")
    assert lines[3] == '### turn 3 - tool call book_hotel({"city": "Paris"}) failed: no rooms left'
    assert lines[4:] == ["### turn 4 - user", "### turn 4 - assistant", "### turn 5 - the run ended (travel)"]
    assert "明天巴黎天气如何?顺便订酒店。" in event.output.split("### turn 2")[0]
    assert "gpt-4o" not in event.output  # blind mode: the plan's model is kept, not shown
    # the request is neither a tool call nor an error: the tool spans are the calls
    assert (metrics["tool_calls"], metrics["tool_errors"], metrics["steps"], metrics["errors"]) == (
        2,
        1,
        4,
        0,
    )
    assert (metrics["turns"], metrics["score_mean"], metrics["unclean_turns"]) == (5, 1.0, 1)
    assert len(event.agent.results) == 1  # type: ignore[union-attr]  # the one scored turn: the answer


@pytest.mark.parametrize("convention", PLANS)
def test_without_a_spans_session_a_tool_call_only_answer_is_a_dead_letter_naming_the_tools(
    convention: str,
) -> None:
    raw, _ = _export("proto", plan=convention)
    _, suites = parse_config({**SUITES, "sessions": []})
    items = Inputs(suites.inputs, steps=suites.assembles_spans).expand([(raw, Source("spans", 0, 0))])
    assert [item.error is None for item in items] == [False, True]
    error = items[0].error
    assert error is not None and error.kind == "schema"  # type: ignore[attr-defined]
    assert "answered with tool calls only (get_weather, book_hotel): no text to evaluate" in str(error)
    assert "content capture" not in str(error)


async def test_a_run_with_plan_steps_gives_the_same_result_online_and_offline(
    tmp_path: Path, aredis: Any, prefix: str
) -> None:
    """The worker's path (Processor, Redis state, closer) and ``streameval evaluate`` on the same OTLP/JSON
    exports: the same run results, plan steps included."""
    from streameval.features.sessions.closer import SessionCloser
    from streameval.features.sessions.state import SessionStore, session_terms
    from streameval.models import SessionResult
    from streameval.outputs import Publish
    from streameval.processor import Processor
    from streameval.store import ResultStore

    exports = [_export("json", plan=convention)[0] for convention in PLANS]
    config = tmp_path / "suites.yaml"
    config.write_text(json.dumps(SUITES, ensure_ascii=False), encoding="utf-8")
    source = tmp_path / "spans.jsonl"
    source.write_bytes(b"\n".join(exports) + b"\n")
    out = tmp_path / "out.jsonl"
    argv = ["evaluate", "--config", str(config), "--input", str(source), "--output", str(out)]
    import asyncio

    assert await asyncio.to_thread(main, [*argv, "--input-topic", "spans.json", "--quiet"]) == 0
    offline = [
        SessionResult.model_validate_json(line)
        for line in (tmp_path / "out.sessions.jsonl").read_bytes().splitlines()
    ]
    assert not (tmp_path / "out.deadletter.jsonl").read_bytes()

    _, suites = parse_config(SUITES)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    state = SessionStore(aredis, session_terms(suites.sessions, 0.0), prefix=prefix, worker_id="w")
    processor = Processor(
        pipeline, store, inputs=Inputs(suites.inputs, steps=True), steps=[AppendTurns(state)]
    )
    published = await processor.process_batch(
        [(raw, Source("spans.json", 0, i)) for i, raw in enumerate(exports)]
    )
    assert [m.kind for m in published] == ["result"] * len(exports)  # the answers; no dead letter
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)

    assert await SessionCloser(state, store, pipeline, suites.sessions).run_once(send) == len(exports)
    online = [SessionResult.model_validate_json(m.value) for m in sent if m.kind == "session"]
    skip = {"closed_at", "evaluated_at", "latency_ms"}
    assert sorted((r.model_dump(exclude=skip) for r in online), key=lambda r: r["key"]) == sorted(
        (r.model_dump(exclude=skip) for r in offline), key=lambda r: r["key"]
    )
    for run in online:
        assert run.closed_by == "end" and len(run.turn_ids) == 5
        assert (run.metrics.tool_calls, run.metrics.tool_errors, run.metrics.steps) == (2, 1, 4)
