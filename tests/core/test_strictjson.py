"""Strict JSON checks: exact answers, and CPU linear in the input whatever its bytes.

The depth scan once used a backtracking regex: 65 ``{`` then ``"\\`` repeated (a string that never
closes) cost 24 s at 80 KB. Here every adversarial shape is timed at 256 KiB and 1 MiB (the default
event size limit) with ``time.process_time``: the larger must cost about 4x the smaller (a quadratic
scan costs 16x) and stay under a bound generous enough for a loaded 2-core box.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streameval.errors import InvalidJSON
from streameval.strictjson import check_depth, check_strict, loads_strict, nesting_depth

MIB = 1 << 20


def _reference_depth(raw: bytes) -> int:
    """The depth scan's definition, one byte at a time: ``\\`` before ``\\`` or ``"`` makes a pair
    that is skipped (inside a string: an escape; outside, the bytes are not JSON anyway)."""
    depth = deepest = 0
    inside = False
    i = 0
    while i < len(raw):
        c = raw[i : i + 1]
        if c == b"\\" and raw[i + 1 : i + 2] in (b"\\", b'"'):
            i += 2
            continue
        if c == b'"':
            inside = not inside
        elif not inside and c in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and c in b"]}":
            depth -= 1
        i += 1
    return deepest


def _true_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_true_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_true_depth, value), default=0)
    return 0


@given(
    st.binary(max_size=200)
    | st.lists(st.sampled_from([b'"', b"\\", b"[", b"]", b"{", b"}", b"a", b'\\"']), max_size=120).map(
        b"".join
    )
)
@settings(max_examples=400, deadline=None)
def test_depth_scan_matches_its_definition(raw: bytes) -> None:
    assert nesting_depth(raw) == _reference_depth(raw)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values, st.booleans())
@settings(max_examples=300, deadline=None)
def test_depth_of_real_json_ignores_brackets_in_strings(value: object, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nesting_depth(raw) == _true_depth(value)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"a":1e999}', "1e999 overflows a double"),
        (b'{"a":-1E+400}', "-1E+400 overflows a double"),
        (b'{"a":[0.5,' + b"9" * 200 + b"e200]}", "overflows a double"),
        (b'{"a":' + b"9" * 400 + b"}", "(400 digits) overflows a double"),
        (b'{"a":NaN}', "NaN is not JSON"),
        (b'{"a":Infinity}', "Infinity is not JSON"),
        (b'{"a":1,"a":2}', "duplicate key 'a'"),
    ],
)
def test_check_strict_rejects(raw: bytes, words: str) -> None:
    with pytest.raises(InvalidJSON, match="not strict JSON") as info:
        check_strict(raw)
    assert words in str(info.value)
    with pytest.raises(InvalidJSON):
        loads_strict(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1e308}',
        b'{"a":-1.7976931348623157e308}',
        b'{"a":1e-999}',
        b'{"a":' + b"9" * 300 + b"}",
        b'{"a":"1e999 e100"}',
    ],
)
def test_check_strict_keeps_finite_numbers(raw: bytes) -> None:
    check_strict(raw)
    assert loads_strict(raw) == json.loads(raw)


def test_loads_strict_checks_depth_first() -> None:
    with pytest.raises(InvalidJSON, match="nested 5 levels deep; the limit is 4"):
        loads_strict(b"[[[[[]]]]]", max_depth=4)


# -- CPU linear in the size -------------------------------------------------------------------


def _fill(unit: bytes, size: int, head: bytes = b"") -> bytes:
    return (head + unit * (size // len(unit) + 1))[:size]


#: shapes that broke or could break a scan: each makes ``size`` bytes
ADVERSARIAL: dict[str, Callable[[int], bytes]] = {
    "unclosed string after 65 braces": lambda n: _fill(b'"\\', n, b"{" * 65),
    "unclosed plain string": lambda n: _fill(b"a", n, b"{" * 65 + b'"'),
    "run of backslashes": lambda n: _fill(b"\\", n, b"{" * 65 + b'"'),
    "backslash quote pairs": lambda n: _fill(b'\\"', n, b"[" * 65),
    "quote storm": lambda n: _fill(b'"', n, b"[" * 65),
    "empty strings": lambda n: _fill(b'"",', n, b"[" * 65),
    "bracket storm": lambda n: _fill(b"[", n),
    "bracket pairs": lambda n: _fill(b"[]", n),
    "brackets in strings": lambda n: _fill(b'"[{",', n, b"[" * 65),
    "alternating": lambda n: _fill(b'"["[', n),
    "digits and exponents": lambda n: _fill(b"9" * 99 + b"e999,", n, b"["),
}


def _cpu(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _checks(raw: bytes) -> None:
    try:
        check_depth(raw)
        check_strict(raw)
    except InvalidJSON:
        pass


@pytest.mark.parametrize("shape", ADVERSARIAL)
def test_checks_are_linear_on_adversarial_bytes(shape: str) -> None:
    make = ADVERSARIAL[shape]
    # a quadratic scan would take minutes at 256 KiB: fail on 16 KiB before trying more
    probe = make(16 * 1024)
    assert _cpu(lambda: _checks(probe), repeat=1) < 0.05, shape
    small, large = make(MIB // 4), make(MIB)
    t_small = _cpu(lambda: _checks(small))
    assert t_small < 0.1, f"{shape}: {t_small * 1000:.0f} ms for 256 KiB"
    t_large = _cpu(lambda: _checks(large))
    # the target is <= 50 ms per MiB (measured: <= ~40 ms); 4x margin for a loaded box
    assert t_large < 0.2, f"{shape}: {t_large * 1000:.0f} ms for 1 MiB"
    # linear is 4x; allow noise on small timings, a quadratic scan is 16x
    assert t_large <= 8 * t_small + 0.01, (shape, t_small, t_large)


chunks = st.sampled_from(
    [b"{", b"[", b"]", b"}", b'"', b"\\", b'"\\', b'\\"', b"\\\\", b"a", b":", b",", b"1e999", b"9" * 120]
)


@given(st.lists(chunks, min_size=1, max_size=6))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_repeated_pattern_of_one_mib_is_checked_quickly(pattern: list[bytes]) -> None:
    raw = _fill(b"".join(pattern), MIB, b"{" * 65)
    assert _cpu(lambda: _checks(raw), repeat=1) < 0.2
