"""What agent runs cost: the spans of OTLP traces assembled into runs (``assemble: spans``), against the same
spans evaluated as plain LLM events, in one run.

    python bench/agent_runs.py [--runs 2000] [--pods 8] [--export-s 5] [--jitter-s 2] [--partitions 6]
                               [--batch 10] [--spread-s 600] [--format otlp_proto] [--tool-only 0]
                               [--seed N] [--profile]

One fresh ``redis-server`` (free loopback port, no persistence). ``--runs`` agent runs made with the real
OpenTelemetry SDK (explicit start and end times, an hour in the past, starts spread over ``--spread-s``),
each a trace of the OTel GenAI conventions: a root span (``invoke_agent``, 3 % fail), 1-4 rounds of an LLM
call (``chat``, text and tool calls in ``gen_ai.output.messages``, the conversation so far in
``gen_ai.input.messages``) followed by 1-2 tool calls (``execute_tool``, arguments and result; 12 % fail
with a recorded exception), a sub-agent in 30 % of the runs (``invoke_agent`` below the root, its own
LLM and tool spans; 10 % fail), and a final LLM call with the answer. The spans are exported as an
application and a Collector export them: each of ``--pods`` instances (a resource each, the runs spread
over them) exports the spans that ended in each ``--export-s`` (the SDK's batch span processor), and
each export is one Kafka message (``ExportTraceServiceRequest``, ``encode_spans`` of the OTLP exporters:
what the Collector's ``kafka`` exporter writes by default) on a random partition of ``--partitions`` (no
key): so the spans of a run are spread over several messages and partitions. A message arrives its
export time + a random delay in [0, ``--jitter-s``); each partition is read in arrival order, in batches
of ``--batch`` messages taken round robin (as workers interleave partitions): spans of a run arrive out
of order, the root span sometimes before its children. Every LLM call that asks for tools also says
something ("Let me call get_weather first."); with ``--tool-only SHARE`` that share of them answers with
tool calls only, as OpenAI's chat completions do (no text: in the plain pass such a span is a ``schema``
dead letter naming its tools, in the runs pass a ``plan`` step of its run; docs/inputs.md,
docs/sessions.md).

The same messages go through the worker's :class:`~streameval.processor.Processor` (its OTLP input
decoding included, in the worker's process) twice: once with a suite file without sessions (the
baseline: LLM spans are evaluated as events, tool, sub-agent and root spans are skipped at decoding), once
with a session ``assemble: spans`` keyed by ``metadata.trace_id`` (runs: the LLM spans are also turns of
their run, the other spans are steps appended to it). Printed:

* the messages each pass published by kind (results, dead letters);
* Redis CPU µs per span and per LLM span (``INFO cpu``, sys + user) and the ratio run / plain;
* worker CPU µs per span and per LLM span (``time.process_time``: decode, evaluate, record, append) and
  the ratio;
* bytes per open run (``used_memory`` delta of the runs pass minus the plain pass's, per run), and the
  wall time each pass took to read every message;
* closing: the session closer runs every second until every run is published; latency from each run's
  deadline (its last span's arrival + ``windowing.allowed_lateness_s``, 5 s: the root span carries the
  end marker) to its publication, and from the batch that held its root span to its publication (p50,
  p99); closer CPU (worker and Redis) per run closed; what the results hold (steps, tool errors, closed_by)
  against what was generated.

Nothing is asserted. As in bench/sessions.py the closer runs after every message is processed: the
closing figures are those of a backlog (every run due within the time the worker took to read them). The
closer's cost with many open sessions waiting is bench/sessions.py's ``--open`` (the same index).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _otel import export_json, export_proto
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from redis_cost import _start_node

from streameval.config import parse_config_text
from streameval.features.sessions.closer import SessionCloser
from streameval.features.sessions.state import (
    META_FIELDS,
    META_FORMAT,
    SessionKeys,
    SessionStore,
    session_terms,
)
from streameval.features.sessions.step import AppendTurns
from streameval.features.setup import annotators
from streameval.inputs import Inputs
from streameval.models import SessionResult
from streameval.outputs import Publish
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore

PROFILE = False  # --profile: Redis commandstats per span of each pass
TOOL_ONLY = 0.0  # --tool-only: share of the LLM calls asking for tools that give no text
TOPIC = "otlp_spans"
SESSION = "runs"

SUITES = """
inputs:
  - {{topic: otlp_spans, format: {fmt}}}
suites:
  - name: agent-llm
    default: true
    evaluators:
      - {{evaluator: contains, params: {{value: "Paris", ignore_case: true}}}}
      - {{evaluator: regex, params: {{pattern: "\\\\d"}}, weight: 2}}
"""
SESSIONS = """
sessions:
  - name: runs
    key: metadata.trace_id
    assemble: spans
    gap_s: 600
    category: agent
    evaluators: [{evaluator: turn_scores}, {evaluator: thread_clean, weight: 0}, {evaluator: adaptability, weight: 0}]
"""

NS = 1_000_000_000
SYSTEM = (
    "You are a travel assistant for a corporate booking desk. Plan before you act, call one tool at a time "
    "unless the calls are independent, never invent prices or availability: quote the tools. Answer in the "
    "user's language, in at most five sentences, with the figures the user needs (dates, prices, times). "
    "If a tool fails, say so and offer an alternative instead of retrying blindly more than once."
)
TASKS = [
    "Book me a hotel near the Gare de Lyon in Paris for 3 nights from March 12, under 180 EUR a night.",
    "What's the weather in Lyon this weekend, and is the TGV from Paris on Saturday at 9 still available?",
    "Find a flight from Berlin to Paris on the 14th arriving before noon, economy, and add it to my trip.",
    "明天巴黎天气如何?顺便帮我订一家埃菲尔铁塔附近的酒店,两晚。",
    "Compare the two cheapest hotels in Marseille for next Tuesday and tell me which has free cancellation.",
    "My train to Paris was cancelled (booking ZX81Q). Rebook me on the next one and update the hotel check-in.",
]
TOOLS: dict[str, tuple[dict[str, Any], str]] = {
    "get_weather": ({"city": "Paris", "days": 3, "units": "metric"}, "weather"),
    "search_hotels": ({"city": "Paris", "near": "Gare de Lyon", "nights": 3, "max_price": 180}, "hotels"),
    "book_hotel": ({"hotel_id": "H-20931", "check_in": "2026-03-12", "nights": 3, "guests": 1}, "booking"),
    "search_trains": ({"from": "Paris", "to": "Lyon", "date": "2026-03-14", "after": "09:00"}, "trains"),
    "search_flights": (
        {"from": "BER", "to": "CDG", "date": "2026-03-14", "arrive_before": "12:00"},
        "flights",
    ),
    "get_booking": ({"reference": "ZX81Q"}, "booking"),
}
FAILURES = [
    "TimeoutError: upstream hotel API timed out after 10 s",
    "no rooms left for these dates",
    "HTTP 429 Too Many Requests: rate limited, retry after 30 s",
    "booking reference not found",
]
MODELS = [
    ("gpt-4o", "openai", "gpt-4o-2024-08-06"),
    ("claude-sonnet-4", "anthropic", "claude-sonnet-4-20250514"),
]


def _result(kind: str, rng: random.Random) -> str:
    if kind == "weather":
        days = [
            {
                "date": f"2026-03-{12 + d}",
                "min": rng.randint(3, 9),
                "max": rng.randint(11, 19),
                "sky": "cloudy",
            }
            for d in range(3)
        ]
        return json.dumps({"city": "Paris", "forecast": days})
    if kind == "hotels":
        hotels = [
            {
                "id": f"H-{rng.randint(10000, 99999)}",
                "name": f"Hôtel {rng.choice(['Lyon Gare', 'Bastille', 'Marais', 'Bercy'])} {i}",
                "price": rng.randint(95, 240),
                "free_cancellation": rng.random() < 0.5,
                "distance_m": rng.randint(80, 1500),
            }
            for i in range(rng.randint(3, 8))
        ]
        return json.dumps({"results": hotels, "currency": "EUR"})
    if kind == "trains" or kind == "flights":
        legs = [
            {
                "departs": f"{h:02d}:{rng.choice(['05', '20', '35', '50'])}",
                "price": rng.randint(29, 190),
                "seats": rng.randint(0, 40),
            }
            for h in range(7, 7 + rng.randint(3, 7))
        ]
        return json.dumps({"options": legs})
    return json.dumps(
        {"reference": "ZX81Q", "status": "confirmed", "hotel_id": "H-20931", "total": rng.randint(300, 540)}
    )


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


class _Clock:
    """A run's time line in ns: spans start and end where the run's clock is."""

    def __init__(self, start: int) -> None:
        self.now = start

    def take(self, low: float, high: float, rng: random.Random) -> int:
        self.now += int(rng.uniform(low, high) * NS)
        return self.now


@dataclass
class Tally:
    """What was generated, to hold the results against."""

    spans: int = 0
    llm: int = 0
    tools: int = 0
    tool_errors: int = 0  # failed tool and sub-agent spans
    agents: int = 0
    roots: int = 0
    root_errors: int = 0
    tool_only: int = 0  # LLM spans with tool calls and no text (--tool-only)
    traces: list[str] = field(default_factory=list)


def _llm(
    tracer: Tracer,
    rng: random.Random,
    clock: _Clock,
    model: tuple[str, str, str],
    history: list[dict[str, Any]],
    answer: str,
    calls: Sequence[tuple[str, str, dict[str, Any]]],
    tally: Tally,
) -> None:
    start = clock.take(0.01, 0.05, rng)
    output: dict[str, Any] = (
        _text_message("assistant", answer) if answer else {"role": "assistant", "parts": []}
    )
    for call_id, name, arguments in calls:
        output["parts"].append({"type": "tool_call", "id": call_id, "name": name, "arguments": arguments})
    output["finish_reason"] = "tool_calls" if calls else "stop"
    request, provider, response = model
    span = tracer.start_span(
        f"chat {request}",
        kind=SpanKind.CLIENT,
        start_time=start,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": request,
            "gen_ai.response.model": response,
            "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(64):016x}",
            "gen_ai.request.temperature": 0.2,
            "gen_ai.usage.input_tokens": sum(len(json.dumps(m)) for m in history) // 4,
            "gen_ai.usage.output_tokens": len(answer) // 4 + 20 * len(calls),
            "gen_ai.response.finish_reasons": [output["finish_reason"]],
            "gen_ai.input.messages": json.dumps(history, ensure_ascii=False),
            "gen_ai.output.messages": json.dumps([output], ensure_ascii=False),
            "server.address": "api.openai.com" if provider == "openai" else "api.anthropic.com",
        },
    )
    span.end(end_time=clock.take(0.5, 3.5, rng))
    history.append(output)
    tally.spans += 1
    tally.llm += 1


def _tool(
    tracer: Tracer, rng: random.Random, clock: _Clock, call: tuple[str, str, dict[str, Any]], tally: Tally
) -> str:
    call_id, name, arguments = call
    span = tracer.start_span(
        f"execute_tool {name}",
        start_time=clock.take(0.001, 0.01, rng),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(arguments),
        },
    )
    end = clock.take(0.05, 1.5, rng)
    tally.spans += 1
    tally.tools += 1
    if rng.random() < 0.12:
        reason = rng.choice(FAILURES)
        try:
            raise RuntimeError(reason)
        except RuntimeError as exc:  # with its traceback, as an instrumentation records it
            span.record_exception(exc, timestamp=end)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)
        tally.tool_errors += 1
        return json.dumps({"error": reason})
    result = _result(TOOLS[name][1], rng)
    span.set_attribute("gen_ai.tool.call.result", result)
    span.end(end_time=end)
    return result


def _round(
    tracer: Tracer,
    rng: random.Random,
    clock: _Clock,
    model: tuple[str, str, str],
    history: list[dict[str, Any]],
    tally: Tally,
) -> None:
    """An LLM call that asks for 1-2 tools, and the tool calls (their answers join the history)."""
    calls = [
        (f"call_{rng.getrandbits(48):012x}", name, TOOLS[name][0])
        for name in rng.sample(sorted(TOOLS), rng.choice([1, 1, 1, 2]))
    ]
    names = " and ".join(name for _, name, _ in calls)
    text = f"Let me call {names} first."
    if TOOL_ONLY and rng.random() < TOOL_ONLY:
        text = ""  # only tool calls, as OpenAI's chat completions answer them (content null)
        tally.tool_only += 1
    _llm(tracer, rng, clock, model, history, text, calls, tally)
    for call in calls:
        result = _tool(tracer, rng, clock, call, tally)
        history.append(
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": call[0], "response": result}]}
        )


def agent_run(tracer: Tracer, rng: random.Random, start_ns: int, tally: Tally) -> None:
    """One run (module docstring): root, rounds of LLM + tools, maybe a sub-agent, the final answer."""
    clock = _Clock(start_ns)
    model = rng.choice(MODELS)
    task = rng.choice(TASKS)
    root = tracer.start_span(
        "invoke_agent travel-desk",
        kind=SpanKind.SERVER,
        start_time=clock.now,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel-desk",
            "gen_ai.agent.id": "asst_travel_desk_v3",
            "gen_ai.conversation.id": f"conv-{rng.getrandbits(40):010x}",
            "gen_ai.provider.name": model[1],
            "gen_ai.request.model": model[0],
        },
    )
    tally.spans += 1
    tally.roots += 1
    tally.traces.append(f"{root.get_span_context().trace_id:032x}")
    history = [_text_message("system", SYSTEM), _text_message("user", task)]
    with trace.use_span(root, end_on_exit=False):
        rounds = rng.randint(1, 4)
        agent_at = rng.randrange(rounds) if rng.random() < 0.3 else -1
        for r in range(rounds):
            _round(tracer, rng, clock, model, history, tally)
            if r == agent_at:
                sub = tracer.start_span(
                    "invoke_agent researcher",
                    start_time=clock.take(0.001, 0.01, rng),
                    attributes={
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": "researcher",
                        "gen_ai.input.messages": json.dumps(
                            [_text_message("user", task)], ensure_ascii=False
                        ),
                    },
                )
                tally.spans += 1
                tally.agents += 1
                inner = [_text_message("system", "You research travel options. Cite sources."), history[1]]
                with trace.use_span(sub, end_on_exit=False):
                    _round(tracer, rng, clock, model, inner, tally)
                    _llm(
                        tracer,
                        rng,
                        clock,
                        model,
                        inner,
                        "Two options fit: the 9:05 TGV (49 EUR) or the 11:05.",
                        (),
                        tally,
                    )
                if rng.random() < 0.1:
                    sub.set_status(Status(StatusCode.ERROR, "researcher exceeded its step budget"))
                    tally.tool_errors += 1
                else:
                    sub.set_attribute(
                        "gen_ai.output.messages",
                        json.dumps(
                            [_text_message("assistant", "Two options fit: the 9:05 TGV or the 11:05.")]
                        ),
                    )
                sub.end(end_time=clock.take(0.01, 0.05, rng))
                history.append(_text_message("assistant", "The researcher found two options."))
        answer = rng.choice(
            [
                "Booked: Hôtel Lyon Gare, 3 nights from March 12 at 164 EUR a night (492 EUR), free cancellation.",
                "Paris this weekend: 6-14°C, cloudy; the 9:05 TGV has 12 seats left at 49 EUR.",
                "I could not book: the hotel API timed out twice. The 2 cheapest alternatives are listed above.",
                "明天巴黎多云, 8-15°C; 已为您预订埃菲尔铁塔附近的酒店两晚, 共 356 欧元。",
                "Your flight BER-CDG on the 14th departs 08:20 and lands 10:05; it is added to trip T-4471.",
            ]
        )
        _llm(tracer, rng, clock, model, history, answer, (), tally)
    if rng.random() < 0.03:
        root.set_status(Status(StatusCode.ERROR, "agent stopped: max iterations reached"))
        tally.root_errors += 1
    root.end(end_time=clock.take(0.005, 0.05, rng))


@dataclass
class Message:
    raw: bytes
    arrival: float
    partition: int
    roots: list[str]  # the traces whose root span this message holds
    spans: int
    traces: set[str]  # the traces it holds spans of


def traces(
    runs: int,
    pods: int,
    spread_s: float,
    export_s: float,
    jitter_s: float,
    partitions: int,
    fmt: str,
    seed: int,
) -> tuple[list[Message], Tally]:
    """The runs' spans as Kafka messages (module docstring), in no particular order, and what they hold."""
    rng = random.Random(seed)
    random.seed(seed)  # the SDK's trace and span ids
    tally = Tally()
    base = int((time.time() - 3600) * NS)
    spans_of: list[list[ReadableSpan]] = []
    for pod in range(pods):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(
            resource=Resource.create(
                {
                    "service.name": "travel-desk-agent",
                    "service.version": "3.4.1",
                    "service.instance.id": f"travel-desk-agent-7d9f8-{pod:05d}",
                    "deployment.environment.name": "production",
                    "k8s.pod.name": f"travel-desk-agent-7d9f8-{pod:05d}",
                }
            )
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("openai-agents-instrumentation", "0.9.0")
        for _ in range(pod, runs, pods):
            agent_run(tracer, rng, base + int(rng.uniform(0, spread_s) * NS), tally)
        spans_of.append(list(exporter.get_finished_spans()))
        provider.shutdown()
    encode = export_proto if fmt == "otlp_proto" else export_json
    messages = []
    for spans in spans_of:
        windows: dict[int, list[ReadableSpan]] = {}
        for span in spans:
            assert span.end_time is not None
            windows.setdefault(int((span.end_time - base) / NS // export_s), []).append(span)
        for window, held in sorted(windows.items()):
            held.sort(key=lambda s: s.end_time or 0)
            for start in range(0, len(held), 512):  # the batch span processor's max_export_batch_size
                chunk = held[start : start + 512]
                messages.append(
                    Message(
                        encode(chunk),
                        base / NS + (window + 1) * export_s + rng.uniform(0, jitter_s),
                        rng.randrange(partitions),
                        [f"{s.context.trace_id:032x}" for s in chunk if s.parent is None],
                        len(chunk),
                        {f"{s.context.trace_id:032x}" for s in chunk},
                    )
                )
    return messages, tally


def partitioned(
    messages: list[Message], partitions: int, batch: int
) -> list[list[tuple[bytes, Source, list[str]]]]:
    """Batches of each partition in arrival order, taken round robin (as workers interleave partitions)."""
    queues: list[list[tuple[bytes, Source, list[str]]]] = [[] for _ in range(partitions)]
    for m in sorted(messages, key=lambda m: m.arrival):
        queue = queues[m.partition]
        queue.append((m.raw, Source(TOPIC, m.partition, len(queue)), m.roots))
    batches = []
    for start in range(0, max(len(q) for q in queues), batch):
        batches += [q[start : start + batch] for q in queues if q[start : start + batch]]
    return batches


def spread(messages: list[Message], batches: list[list[tuple[bytes, Source, list[str]]]]) -> str:
    """How a run's spans reach the worker: messages and partitions per run, and the runs whose root span
    is read before another of their spans."""
    at: dict[bytes, int] = {raw: i for i, batch in enumerate(batches) for raw, _, _ in batch}
    held: dict[str, list[Message]] = {}
    for m in messages:
        for key in m.traces:
            held.setdefault(key, []).append(m)
    early = sum(
        1
        for key, ms in held.items()
        if min(at[m.raw] for m in ms if key in m.roots) < max(at[m.raw] for m in ms)
    )
    n = len(held)
    return (
        f"a run's spans in {sum(map(len, held.values())) / n:.1f} messages on "
        f"{sum(len({m.partition for m in ms}) for ms in held.values()) / n:.1f} partitions; "
        f"root span read in an earlier batch than another of its run's spans in {early} runs "
        f"({early / n:.0%})"
    )


@dataclass
class Pass:
    """One pass over every batch: worker and Redis CPU s, the memory delta, the wall time; messages
    published by kind (result, deadletter); when each root span's batch was done (wall clock); the parts
    for closing."""

    worker: float
    redis: float
    memory: int
    wall: float
    published: Counter[str]
    roots: dict[str, float]
    parts: Any


async def redis_cpu(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def used_memory(client: aioredis.Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def run_spans(
    client: aioredis.Redis,
    text: str,
    prefix: str,
    batches: list[list[tuple[bytes, Source, list[str]]]],
    spans: int,
    with_runs: bool,
) -> Pass:
    """Read every batch with the suite file ``text`` (module docstring)."""
    _, suites = parse_config_text(text)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(client, prefix=prefix, windows=(60,))
    state = (
        SessionStore(client, session_terms(suites.sessions), prefix=prefix, worker_id="bench")
        if with_runs
        else None
    )
    inputs = Inputs(suites.inputs, steps=suites.assembles_spans)
    processor = Processor(pipeline, store, inputs=inputs, steps=[AppendTurns(state)])
    await processor.process_batch([m[:2] for m in batches[0][:1]])  # warm: scripts loaded, pairs admitted
    await client.config_resetstat()
    roots: dict[str, float] = {}
    topics: Counter[str] = Counter()
    memory, cpu, redis0 = await used_memory(client), time.process_time(), await redis_cpu(client)
    wall = time.perf_counter()
    for batch in batches:
        for message in await processor.process_batch([(raw, source) for raw, source, _ in batch]):
            topics[message.kind] += 1
        done = time.time()
        for _, _, held in batch:
            roots.update(dict.fromkeys(held, done))
    worker, wall = time.process_time() - cpu, time.perf_counter() - wall
    redis = await redis_cpu(client) - redis0
    if PROFILE:
        stats = await client.info("commandstats")
        print(
            ("runs" if with_runs else "plain")
            + ": "
            + ", ".join(
                f"{k[8:]} {v['calls'] / spans:.3f}/span {v['usec'] / spans:.2f} µs"
                for k, v in sorted(stats.items(), key=lambda kv: -kv[1]["usec"])[:7]
            )
        )
    return Pass(
        worker,
        redis,
        await used_memory(client) - memory,
        wall,
        topics,
        roots,
        (pipeline, store, state, suites),
    )


def _q(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


async def close_all(
    client: aioredis.Redis, parts: Any, runs: int, roots: dict[str, float]
) -> tuple[dict[str, float], list[SessionResult]]:
    pipeline, store, state, suites = parts
    closer = SessionCloser(state, store, pipeline, suites.sessions)
    published: list[tuple[float, SessionResult]] = []

    async def send(message: Publish) -> None:
        published.append((time.time(), SessionResult.model_validate_json(message.value)))

    # each run's deadline and last arrival, from its meta (exact; the due index may hold an earlier score)
    deadlines: dict[str, float] = {}
    arrivals: dict[str, float] = {}
    async with client.pipeline(transaction=False) as pipe:
        keys = list(roots)
        for key in keys:
            pipe.hget(state.keys.keys(SessionKeys.tag(SESSION, key))[1], "v")
        for key, value in zip(keys, await pipe.execute(), strict=True):
            figures = struct.unpack(META_FORMAT, value)
            deadlines[key] = figures[META_FIELDS.index("deadline")]
            arrivals[key] = figures[META_FIELDS.index("arrival")]
    cpu, redis0, wall = time.process_time(), await redis_cpu(client), time.monotonic()
    while len(published) < runs:
        tick = time.monotonic()
        await closer.run_once(send)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        if time.monotonic() - wall > 600:
            break
    worker, redis = time.process_time() - cpu, await redis_cpu(client) - redis0
    delay = sorted(at - deadlines[r.key] for at, r in published)
    since_last = sorted(at - arrivals[r.key] for at, r in published)
    since_root = sorted(at - roots[r.key] for at, r in published)
    return {
        "closed": len(published),
        "delay_p50": _q(delay, 0.5),
        "delay_p99": _q(delay, 0.99),
        "since_last_p50": _q(since_last, 0.5),
        "since_last_p99": _q(since_last, 0.99),
        "since_root_p50": _q(since_root, 0.5),
        "since_root_p99": _q(since_root, 0.99),
        "worker_us": worker / max(1, len(published)) * 1e6,
        "redis_us": redis / max(1, len(published)) * 1e6,
    }, [r for _, r in published]


async def main_async(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    messages, tally = traces(
        args.runs,
        args.pods,
        args.spread_s,
        args.export_s,
        args.jitter_s,
        args.partitions,
        args.format,
        args.seed,
    )
    batches = partitioned(messages, args.partitions, args.batch)
    spans, llm, n = tally.spans, tally.llm, args.runs
    order = spread(messages, batches)
    print(
        f"{n} agent runs, {spans} spans ({spans / n:.1f} per run: {llm / n:.1f} LLM, {tally.tools / n:.1f} tool "
        f"({tally.tool_errors} failed tool or sub-agent spans), {tally.agents / n:.2f} sub-agent, 1 root; "
        f"{tally.tool_only} LLM spans with only tool calls), "
        f"{len(messages)} {args.format} messages ({spans / len(messages):.1f} spans, "
        f"{sum(len(m.raw) for m in messages) / len(messages) / 1024:.1f} KiB each), {args.pods} pods exporting "
        f"every {args.export_s:g} s, {args.partitions} partitions, batches of {args.batch} messages "
        f"({spans / len(batches):.0f} spans), arrival jitter {args.jitter_s:g} s; made in "
        f"{time.perf_counter() - started:.1f} s; {order}"
    )
    with tempfile.TemporaryDirectory() as directory:
        port, proc = _start_node(directory)
        client = aioredis.Redis(port=port)
        try:
            suites = SUITES.format(fmt=args.format)
            plain = await run_spans(client, suites, "plain:", batches, spans, with_runs=False)
            runs = await run_spans(client, suites + SESSIONS, "runs:", batches, spans, with_runs=True)
            for label, count in (("span", spans), ("LLM span", llm)):
                pr, rr = plain.redis / count * 1e6, runs.redis / count * 1e6
                pw, rw = plain.worker / count * 1e6, runs.worker / count * 1e6
                print(f"Redis CPU per {label}:  plain {pr:7.1f} µs   run {rr:7.1f} µs   ratio {rr / pr:.2f}x")
                print(f"worker CPU per {label}: plain {pw:7.1f} µs   run {rw:7.1f} µs   ratio {rw / pw:.2f}x")
            print(
                f"bytes per open run: {(runs.memory - plain.memory) / n:.0f} "
                f"(runs pass {runs.memory / n:.0f} per run, plain pass {plain.memory / n:.0f}); read in "
                f"{runs.wall:.1f} s (plain pass {plain.wall:.1f} s); published per pass: "
                f"{dict(plain.published)} (runs pass {dict(runs.published)})"
            )
            closing, results = await close_all(client, runs.parts, n, runs.roots)
            print(
                f"closing {closing['closed']} runs: deadline -> published p50 {closing['delay_p50']:.2f} s, "
                f"p99 {closing['delay_p99']:.2f} s; root span's batch -> published p50 {closing['since_root_p50']:.2f} s, "
                f"p99 {closing['since_root_p99']:.2f} s; last span -> published p50 {closing['since_last_p50']:.2f} s, "
                f"p99 {closing['since_last_p99']:.2f} s; closer CPU per run: worker {closing['worker_us']:.0f} µs, "
                f"Redis {closing['redis_us']:.0f} µs"
            )
            by = Counter(r.closed_by for r in results)
            print(
                f"results: {sum(len(r.turn_ids) for r in results)} turns and steps of {spans} spans, "
                f"{sum(r.metrics.steps for r in results)} steps (generated {spans - llm + tally.tool_only}: "
                f"{tally.tool_only} of them plan steps), "
                f"{sum(r.metrics.tool_errors for r in results)} tool errors (generated {tally.tool_errors}), "
                f"{sum(r.metrics.errors for r in results)} failed runs (generated {tally.root_errors}), "
                f"closed_by {dict(by)}, revisions {sum(r.revision > 0 for r in results)}"
            )
        finally:
            await client.aclose()
            proc.terminate()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--pods", type=int, default=8, help="application instances exporting spans")
    parser.add_argument("--export-s", type=float, default=5.0, help="each pod's export interval")
    parser.add_argument("--jitter-s", type=float, default=2.0, help="a message's arrival delay, at most")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--batch", type=int, default=10, help="messages per batch")
    parser.add_argument("--spread-s", type=float, default=600.0, help="the runs start within this long")
    parser.add_argument("--format", choices=["otlp_proto", "otlp_json"], default="otlp_proto")
    parser.add_argument(
        "--tool-only",
        type=float,
        default=0.0,
        help="share of the LLM calls that ask for tools answering with tool calls only, no text (OpenAI's "
        "chat completions): a dead letter in the plain pass, a plan step of its run in the runs pass",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="Redis commandstats per span of each pass")
    args = parser.parse_args()
    global PROFILE, TOOL_ONLY
    PROFILE, TOOL_ONLY = args.profile, args.tool_only
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
