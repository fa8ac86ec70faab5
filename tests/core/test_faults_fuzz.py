"""Hostile input (docs/reliability.md): 10,000 fuzzed events, every one a dead letter with a reason; strict JSON.

Hypothesis draws 200 batches of 50 broken events each (invalid UTF-8, truncation, huge strings,
deep nesting, wrong types, missing id, NaN/Infinity, duplicate keys, oversize). Every one must come
out of :meth:`Pipeline.process` as a dead letter whose kind matches the breakage and whose reason is
not empty; the pipeline never raises and never returns a result for them.
"""

from __future__ import annotations

import asyncio
import base64
import tracemalloc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.config import parse_config
from streameval.errors import InvalidJSON
from streameval.pipeline import Pipeline
from streameval.strictjson import check_depth, check_strict, nesting_depth

pytestmark = pytest.mark.faults

MAX_BYTES, MAX_DEPTH = 4096, 16
BATCHES, PER_BATCH = 200, 50  # 10,000 events


def _pipeline() -> Pipeline:
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    return Pipeline(suites, max_event_bytes=MAX_BYTES, max_event_depth=MAX_DEPTH)


PIPELINE = _pipeline()
ids = st.text(min_size=1, max_size=20)
texts = st.text(max_size=40)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)


def _base(event_id: str) -> dict[str, object]:
    return {"id": event_id, "model": "m", "output": "x", "expected": "x"}


def _dup_key(draw: st.DrawFn) -> bytes:
    key = draw(st.sampled_from(["id", "model", "output", "inner"]))
    body = orjson.dumps(_base(draw(ids)))[1:-1]
    pair = orjson.dumps({key: draw(ids)})[1:-1]  # a valid value: only the duplicate is wrong
    if key == "inner":  # the duplicate hides in free-form metadata
        return b"{" + body + b',"metadata":{' + pair + b"," + pair + b"}}"
    return b"{" + body + b"," + pair + b"}"


def _nan(draw: st.DrawFn) -> bytes:
    literal = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"]))
    return orjson.dumps(_base(draw(ids)))[:-1] + b',"metadata":{"v":' + literal + b"}}"


def _deep(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(MAX_DEPTH, 600))  # the event's own object adds one level
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    return (
        orjson.dumps(_base(draw(ids)))[:-1]
        + b',"metadata":{"n":'
        + opener * depth
        + b"1"
        + closer * depth
        + b"}}"
    )


def _wrong_type(draw: st.DrawFn) -> bytes:
    field = draw(
        st.sampled_from(["id", "model", "output", "tags", "references", "metadata", "label", "timestamp"])
    )
    good = {
        "id": "s",
        "model": "s",
        "output": "s",
        "tags": [],
        "references": [],
        "metadata": {},
        "label": True,
        "timestamp": "2026-11-21T10:00:00Z",
    }
    bad = draw(
        st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(texts, scalars, max_size=3)).filter(
            lambda v: (
                type(v) is not type(good[field])
                and not (field == "label" and v is None)
                and not (field == "timestamp" and v is None)
            )
        )
    )
    return orjson.dumps({**_base(draw(ids)), field: bad})


def _missing(draw: st.DrawFn) -> bytes:
    event = _base(draw(ids))
    del event[draw(st.sampled_from(["id", "model", "output"]))]
    return orjson.dumps(event)


def _bad_utf8(draw: st.DrawFn) -> bytes:
    raw = orjson.dumps(_base(draw(ids)))
    cut = draw(st.integers(1, len(raw) - 1))
    return (
        raw[:cut]
        + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
        + raw[cut:]
    )


def _truncated(draw: st.DrawFn) -> bytes:
    raw = orjson.dumps(_base(draw(ids)))
    return raw[: draw(st.integers(0, len(raw) - 1))]


def _huge(draw: st.DrawFn) -> bytes:
    return orjson.dumps({**_base(draw(ids)), "output": "y" * draw(st.integers(MAX_BYTES, 4 * MAX_BYTES))})


def _not_object(draw: st.DrawFn) -> bytes:
    return orjson.dumps(draw(st.one_of(scalars, st.lists(scalars, max_size=3))))


def _garbage(draw: st.DrawFn) -> bytes:
    raw = draw(st.binary(max_size=200))
    return raw if not raw.lstrip().startswith(b"{") else b"!" + raw  # no accidental valid object


KINDS = {  # generator -> the dead letter kind it must produce
    _dup_key: "invalid_json",
    _nan: "invalid_json",
    _deep: "invalid_json",
    _bad_utf8: "invalid_json",
    _truncated: "invalid_json",
    _garbage: "invalid_json",
    _wrong_type: "schema",
    _missing: "schema",
    _not_object: "schema",
    _huge: "too_large",
}


@st.composite
def broken_event(draw: st.DrawFn) -> tuple[str, bytes]:
    make = draw(st.sampled_from(list(KINDS)))
    return make.__name__, make(draw)


@settings(max_examples=BATCHES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(broken_event(), min_size=PER_BATCH, max_size=PER_BATCH))
def test_fuzzed_events_are_all_dead_lettered_with_a_reason(batch: list[tuple[str, bytes]]) -> None:
    async def run() -> list[object]:
        return list(await asyncio.gather(*(PIPELINE.process(raw) for _, raw in batch)))

    for (maker, raw), outcome in zip(batch, asyncio.run(run()), strict=True):
        assert outcome.result is None, (maker, raw[:200])  # type: ignore[attr-defined]
        letter = outcome.dead_letter  # type: ignore[attr-defined]
        expected = KINDS[globals()[maker]]
        # a truncated/garbage document may happen to be JSON of the wrong shape: a schema error then
        allowed = {expected, "schema"} if maker in ("_truncated", "_garbage", "_bad_utf8") else {expected}
        assert letter.kind in allowed, (maker, letter.kind, letter.reason, raw[:200])
        assert letter.reason.strip()
        assert base64.b64decode(letter.raw) == raw


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"id":"a","id":"b","model":"m","output":"x"}', "duplicate key 'id'"),
        (b'{"id":"a","model":"m","output":"x","metadata":{"k":1,"k":2}}', "duplicate key 'k'"),
        (b'{"id":"a","model":"m","output":"x","metadata":{"v":NaN}}', "NaN is not JSON"),
        (b'{"id":"a","model":"m","output":"x","metadata":{"v":-Infinity}}', "-Infinity is not JSON"),
        (b'{"id":"a","model":"m","output":"x","metadata":' + b"[" * 40 + b"]" * 40 + b"}", "41 levels deep"),
    ],
)
async def test_pydantic_gaps_are_dead_lettered(raw: bytes, words: str) -> None:
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    outcome = await Pipeline(suites, max_event_depth=40).process(raw)
    assert outcome.dead_letter is not None and outcome.dead_letter.kind == "invalid_json"
    assert words in outcome.dead_letter.reason


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b"1", 0),
        (b"{}", 1),
        (b'{"a":[{"b":[]}]}', 4),
        (b'{"a":"[[[[{{{"}', 1),
        (b'["\\"[["]', 1),
        (b"[[],[[]]]", 3),
    ],
)
def test_nesting_depth_ignores_brackets_in_strings(raw: bytes, depth: int) -> None:
    assert nesting_depth(raw) == depth


def test_strict_json_accepts_ordinary_events() -> None:
    raw = orjson.dumps(
        {**_base("a"), "metadata": {"s": "NaN Infinity [[[[", "n": [1.5, -2e300, {"k": None}]}}
    )
    check_depth(raw, max_depth=4)
    check_strict(raw)
    with pytest.raises(InvalidJSON, match="nested 4 levels deep; the limit is 3"):
        check_depth(raw, max_depth=3)


async def test_oversize_event_is_rejected_before_parsing() -> None:
    """Memory per event is bounded by the limit: a 4 MiB event is refused without being parsed."""
    raw = orjson.dumps({**_base("big"), "metadata": {"n": [{"a": 1.5}] * 400_000}})
    assert len(raw) > 4 * MAX_BYTES
    tracemalloc.start()
    try:
        outcome = await PIPELINE.process(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.dead_letter is not None and outcome.dead_letter.kind == "too_large"
    assert f"the limit is {MAX_BYTES}" in outcome.dead_letter.reason
    # parsing would build 400,000 dicts (~25x the bytes); refusing costs only the dead letter's
    # base64 copy of the raw bytes (1.33x, twice while encoding)
    assert peak < 3 * len(raw), peak
