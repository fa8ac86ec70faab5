"""``streameval backfill`` decodes each topic by its input format, as the worker does."""

from __future__ import annotations

import textwrap

import orjson

from streameval.backfill import BackfillReport, native_events
from streameval.config import parse_config_text
from streameval.envelope import Source
from streameval.inputs import Inputs

CONFIG = textwrap.dedent("""
    inputs:
      - topic: app.completions
        format: json
        map: {id: $.request_id, model: $.model, output: $.answer}
      - {topic: evals.requests, format: native}
    suites:
      - name: qa
        default: true
        evaluators: [{evaluator: contains, params: {value: Paris}}]
""")


def test_json_mapped_and_native_topics_become_request_events_with_their_record_times() -> None:
    _, suites = parse_config_text(CONFIG)
    mapped = orjson.dumps({"request_id": "r-1", "model": "m", "answer": "Paris"})
    native = orjson.dumps({"id": "n-1", "model": "m", "output": "Lyon"})
    unmapped = orjson.dumps({"model": "m"})  # no request_id: the live worker dead-lettered it
    messages = [
        (mapped, Source("app.completions", 0, 7), 100.0),
        (native, Source("evals.requests", 2, 3), 200.0),
        (unmapped, Source("app.completions", 0, 8), 300.0),
    ]
    report = BackfillReport(group="g")
    events = native_events(Inputs(suites.inputs), messages, report)
    assert [(orjson.loads(raw), source.offset, at) for raw, source, at in events] == [
        ({"id": "r-1", "model": "m", "output": "Paris"}, 7, 100.0),
        ({"id": "n-1", "model": "m", "output": "Lyon"}, 3, 200.0),
    ]
    assert report.dropped == 1
