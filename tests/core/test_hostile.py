"""Hostile input suite (runs on every CI run, ~10 s): one bad message costs only itself.

Every case a hostile or careless producer was seen to send, plus a fuzzer over event bytes, goes
through the pipeline's decode path with the default limits (1 MiB, depth 64) as the worker runs it,
both :meth:`Pipeline.process` and :meth:`Pipeline.process_sync` (evaluation processes), and through
the offline ``evaluate`` path. For every input: exactly one result or one dead letter, the dead letter
keeps the raw bytes and says why, what the worker would publish serialises, and the process CPU
spent stays bounded (generous bounds for a loaded 2-core box; measured figures in bench/decode.py).
tests/integration/test_hostile_stream.py sends the same kind of batch to a real worker.
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path

import orjson
import pytest
from _support import raw_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.config import parse_config
from streameval.offline import evaluate_file
from streameval.pipeline import Outcome, Pipeline, Source

MIB = 1 << 20
#: CPU one event may cost, s: the worst measured is ~0.15 s for 1 MiB of empty objects (bench/decode.py)
CPU_PER_EVENT = 0.75
GOOD = {"id": "g", "model": "m", "output": "Paris", "expected": "Paris"}


def _pipeline() -> Pipeline:
    _, suites = parse_config(
        {
            "suites": [
                {
                    "name": "s",
                    "default": True,
                    "evaluators": [{"evaluator": "exact_match"}, {"evaluator": "token_f1"}],
                }
            ]
        }
    )
    return Pipeline(suites)


PIPELINE = _pipeline()


def _event(**fields: object) -> bytes:
    return raw_event(**{**GOOD, **fields})


def _fill(unit: bytes, head: bytes = b"", tail: bytes = b"", size: int = MIB - 64) -> bytes:
    """About ``size`` bytes: ``unit`` repeated a whole number of times between ``head`` and ``tail``."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


META = b'{"id":"h","model":"m","output":"x","metadata":{"k":'

#: name -> (raw bytes, dead-letter kind or "result", words the reason must contain)
CASES: dict[str, tuple[bytes, str, str]] = {
    "bad UTF-8": (b'{"id":"u","model":"m","output":"\xff\xfe"}', "invalid_json", "not valid JSON"),
    "bad UTF-8 in a key": (b'{"id":"u","model":"m","output":"x","\xc3":1}', "invalid_json", "not valid JSON"),
    "NaN": (META + b"NaN}}", "invalid_json", "NaN is not JSON"),
    "-Infinity": (META + b"[1,-Infinity]}}", "invalid_json", "-Infinity is not JSON"),
    "1e999": (META + b"1e999}}", "invalid_json", "1e999 overflows a double"),
    "-1E+400 in a list": (META + b"[0.5,-1E+400]}}", "invalid_json", "overflows a double"),
    "400-digit integer": (META + b"9" * 400 + b"}}", "invalid_json", "overflows a double"),
    "5,000-deep nesting": (
        META + b"[" * 5000 + b"]" * 5000 + b"}}",
        "invalid_json",
        "nested 5002 levels deep",
    ),
    "duplicate top-level key": (
        b'{"id":"a","id":"b","model":"m","output":"x"}',
        "invalid_json",
        "duplicate key 'id'",
    ),
    "duplicate nested key": (META + b'{"a":1,"a":2}}}', "invalid_json", "duplicate key 'a'"),
    "10,000-character model name": (_event(model="M" * 10_000), "schema", "$.model"),
    "quadratic-regex input, 1 MiB": (_fill(b'"\\', b"{" * 65), "invalid_json", "nested 65 levels deep"),
    "quadratic-regex input inside a valid event": (
        META + b"[" * 62 + b'"' + b'\\"[' * 60_000 + b'"' + b"]" * 62 + b"}}",  # depth 64: the limit
        "result",
        "",
    ),
    "800 KB output without an id": (orjson.dumps({"model": "m", "output": "A" * 800_000}), "schema", "$.id"),
    "unclosed string": (
        _fill(b"a", b'{"id":"h","model":"m","output":"'),
        "invalid_json",
        "EOF while parsing",
    ),
    "run of backslashes": (
        _fill(b"\\", b'{"id":"h","model":"m","output":"'),
        "invalid_json",
        "not valid JSON",
    ),
    "bracket storm": (_fill(b"["), "invalid_json", "levels deep"),
    "bracket pairs": (_fill(b"[]"), "invalid_json", "not valid JSON"),
    "350k empty objects": (_fill(b"{},", META + b"[", b"{}]}}"), "result", ""),
    "350k empty arrays": (_fill(b"[],", META + b"[", b"[]]}}"), "result", ""),
    "500k wrong references": (
        _fill(b"1,", b'{"id":"h","model":"m","output":"x","references":[', b"1]}"),
        "schema",
        "$.references[0]",
    ),
    "80k unknown keys": (
        b'{"id":"h","model":"m","output":"x",' + b"".join(b'"k%d":1,' % i for i in range(80_000)) + b'"z":1}',
        "schema",
        "problems",
    ),
    "over the size limit": (_event(output="x" * MIB), "too_large", "the limit is 1048576"),
    "empty": (b"", "invalid_json", "not valid JSON"),
    "top-level array": (b"[1,2]", "schema", "is not of type 'object'"),
    "lone surrogate escape": (_event(output="x").replace(b'"x"', b'"\\ud800"'), "invalid_json", "hex escape"),
    "unknown suite": (_event(suite="nope"), "unknown_suite", "nope"),
}


def _check(raw: bytes, outcome: Outcome) -> str:
    """The invariants every outcome must hold; returns its kind ("result" or the dead letter's)."""
    assert (outcome.result is None) != (outcome.dead_letter is None), outcome
    if outcome.result is not None:
        outcome.result.model_dump_json()  # what the worker publishes
        return "result"
    letter = outcome.dead_letter
    assert letter is not None
    assert base64.b64decode(letter.raw) == raw
    assert letter.reason.strip() and len(letter.reason) <= 2000
    letter.model_dump_json()
    return letter.kind


def _timed(raw: bytes) -> tuple[Outcome, float]:
    start = time.process_time()
    outcome = asyncio.run(PIPELINE.process(raw, Source("t", 0, 1), received_at=1.0))
    return outcome, time.process_time() - start


@pytest.mark.parametrize("name", CASES)
def test_hostile_case_costs_only_itself(name: str) -> None:
    raw, kind, words = CASES[name]
    outcome, cpu = _timed(raw)
    assert _check(raw, outcome) == kind, outcome.dead_letter or outcome.result
    if outcome.dead_letter is not None:
        assert words in outcome.dead_letter.reason, outcome.dead_letter.reason
    assert cpu < CPU_PER_EVENT, f"{name}: {cpu:.3f} s of CPU"
    sync = PIPELINE.process_sync(raw, Source("t", 0, 1), 1.0)
    assert sync is not None and _check(raw, sync) == kind


def test_good_events_still_evaluate_after_every_hostile_case() -> None:
    outcome = asyncio.run(PIPELINE.process(_event()))
    assert outcome.result is not None and outcome.result.score == 1.0


async def test_offline_file_of_hostile_lines(tmp_path: Path) -> None:
    """Every line of a file of hostile and good events ends in the output or the dead-letter file."""
    lines = [raw for raw, _, _ in CASES.values() if raw.strip() and b"\n" not in raw and len(raw) < 300_000]
    lines += [_event(id=f"good-{i}") for i in range(5)]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    out, dead = tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    summary = await evaluate_file(PIPELINE, source, out, dead)
    results = out.read_bytes().splitlines()
    letters = [orjson.loads(x) for x in dead.read_bytes().splitlines()]
    assert len(results) + len(letters) == len(lines)
    assert {base64.b64decode(x["raw"]) for x in letters} | {
        r for r in lines if r.startswith(b'{"id":"good-')
    } <= set(lines)
    assert {orjson.loads(r)["id"] for r in results} >= {f"good-{i}" for i in range(5)}
    assert summary is not None


# -- the fuzzer ---------------------------------------------------------------------------------

SEED = _event(metadata={"a": [1, 2.5, {"b": None}], "s": "x"}, references=["Paris"], tags=["t"])
ATOMS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"\\",
    b'\\"',
    b"\\\\",
    b":",
    b",",
    b"NaN",
    b"1e999",
    b"-0",
    b"\xff",
    b"\xc3",
    b"\x00",
    b"\\ud800",
    b'"id"',
    b'"model"',
    b"null",
    b"9" * 120,
    b" ",
    b"\n",
]


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    """A valid event with bytes inserted, replaced or deleted, and often a pattern repeated to a large size."""
    raw = bytearray(SEED)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["insert", "replace", "delete"]))
        piece = draw(
            st.lists(st.sampled_from(ATOMS), min_size=1, max_size=4).map(b"".join) | st.binary(max_size=8)
        )
        if op == "insert":
            raw[at:at] = piece
        elif op == "replace":
            raw[at : at + len(piece)] = piece
        else:
            del raw[at : at + draw(st.integers(1, 8))]
    if draw(st.booleans()):  # a storm: one pattern repeated up to the size limit (or just over it)
        pattern = draw(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3).map(b"".join))
        size = draw(st.sampled_from([1_000, 50_000, MIB - 200, MIB + 10]))
        at = draw(st.integers(0, len(raw)))
        raw[at:at] = (pattern * (size // len(pattern) + 1))[:size]
    return bytes(raw)


@given(hostile_bytes())
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
def test_fuzzed_event_bytes_end_in_a_result_or_dead_letter_in_bounded_cpu(raw: bytes) -> None:
    outcome, cpu = _timed(raw)
    kind = _check(raw, outcome)
    assert kind != "internal", outcome.dead_letter
    assert cpu < CPU_PER_EVENT, f"{cpu:.3f} s of CPU for {len(raw)} bytes: {raw[:80]!r}"
    sync = PIPELINE.process_sync(raw, Source("t", 0, 1), 1.0)
    assert sync is not None and _check(raw, sync) == kind
