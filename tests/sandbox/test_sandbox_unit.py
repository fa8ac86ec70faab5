"""Pure parts of the sandbox: result validation, config-load checks, refusal without a mechanism."""

from __future__ import annotations

import math
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streameval import sandbox
from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.sandbox import SandboxError, SandboxTimeout, _confine, _zygote
from streameval.sandbox._result import to_score


def test_public_names() -> None:
    assert sorted(sandbox.__all__) == sorted(
        [
            "ALLOWED_MODULES",
            "NODE_MODULES",
            "SEED_ERROR_CODE",
            "CodeEvaluator",
            "CodeParams",
            "Mechanisms",
            "SandboxError",
            "SandboxTimeout",
            "SandboxUnavailable",
            "allow_weaker_sandbox",
            "probe",
            "sandbox_setup",
        ]
    )
    assert sandbox.SEED_ERROR_CODE == 503002
    assert sandbox.NODE_MODULES == ("lodash", "dayjs", "validator", "ajv")


@given(
    passed=st.booleans(),
    score=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3)),
)
def test_score_is_always_in_unit_interval_or_an_error(passed: bool, score: float | None) -> None:
    reply = {"ok": {"passed": passed} if score is None else {"passed": passed, "score": score}}
    try:
        result = to_score(reply)
    except SandboxError:
        assert score is not None and not (math.isfinite(score) and 0 <= score <= 1)
        return
    assert 0.0 <= result.score <= 1.0
    assert result.passed is passed
    if score is None:
        assert result.score == (1.0 if passed else 0.0)


@pytest.mark.parametrize(
    ("reply", "error", "needle"),
    [
        ({"error": "timeout", "message": "timeout: 5 ms"}, SandboxTimeout, "timeout"),
        ({"error": "crash", "message": "died"}, SandboxError, "died"),
        ({"ok": None}, SandboxError, "not null"),
        ({"ok": {"passed": 1}}, SandboxError, "boolean 'passed'"),
        ({"ok": {"passed": True, "score": True}}, SandboxError, "must be a number"),
        ({"ok": {"passed": True, "reason": 3}}, SandboxError, "'reason' must be a string"),
        ("nonsense", SandboxError, "malformed"),
    ],
)
def test_bad_replies(reply: object, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle) as caught:
        to_score(reply)
    assert caught.value.code == ("timeout" if error is SandboxTimeout else "execution_failed")


def _config(params: dict[str, object]) -> dict[str, object]:
    return {
        "suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "code", "params": params}]}]
    }


CODE, PARAMS = "suites[0].evaluators[0].params.code", "suites[0].evaluators[0].params"
CONFIG_ERRORS = [
    ({"language": "python", "code": "def evaluate(:\n  pass"}, CODE, "does not compile"),
    (
        {"language": "python", "code": "def score(i, o, e, m):\n    return {}"},
        CODE,
        "must define a top-level function evaluate",
    ),
    ({"language": "ruby", "code": "x"}, PARAMS + ".language", "python"),
    (
        {"language": "python", "code": "evaluate = 1", "timeout_ms": 0},
        PARAMS + ".timeout_ms",
        "greater than or equal to 1",
    ),
    (
        {"language": "python", "code": "evaluate = 1", "memory_mb": 99999},
        PARAMS + ".memory_mb",
        "less than or equal to 2048",
    ),
]
if shutil.which("node"):
    CONFIG_ERRORS += [
        (
            {"language": "nodejs", "code": "module.exports = async function ( {"},
            CODE,
            "Node.js code does not compile",
        ),
        (
            {"language": "nodejs", "code": "async function evaluate() { return {}; }"},
            CODE,
            "must export its function",
        ),
    ]


@pytest.mark.parametrize(("params", "path", "needle"), CONFIG_ERRORS)
def test_bad_code_is_a_config_error_with_the_field_path(
    params: dict[str, object], path: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(params))
    issue = caught.value.issues[0]
    assert issue.path == path
    assert needle in issue.message


def test_defaults_follow_seed_001() -> None:
    _, suites = parse_config(
        _config({"language": "python", "code": "def evaluate(i, o, e, m):\n    return {}"})
    )
    params = suites.all[0].evaluators[0].evaluator.params
    assert (params.timeout_ms, params.memory_mb) == (5000, 128)  # the evaluator-module spec §4.3: 5 s, 128 MB


@pytest.mark.parametrize(
    ("mechanisms", "named"),
    [
        (_confine.Mechanisms(user_namespaces=True, landlock_abi=0, seccomp=True), "Landlock"),
        (_confine.Mechanisms(user_namespaces=False, landlock_abi=3, seccomp=True), "user namespaces"),
        (_confine.Mechanisms(user_namespaces=True, landlock_abi=3, seccomp=False), "seccomp"),
    ],
)
def test_zygote_refuses_when_a_mechanism_is_missing(
    monkeypatch: pytest.MonkeyPatch, mechanisms: _confine.Mechanisms, named: str
) -> None:
    monkeypatch.setattr(_confine, "probe", lambda: mechanisms)
    with pytest.raises(
        RuntimeError, match=f"refusing to run code evaluators: this machine lacks .*{named}"
    ) as caught:
        _zygote.Zygote(allow_weaker=False, max_memory_mb=128)
    assert "STREAMEVAL_ALLOW_WEAKER_SANDBOX" in str(caught.value)


def test_allow_weaker_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMEVAL_ALLOW_WEAKER_SANDBOX", raising=False)
    assert sandbox.allow_weaker_sandbox() is False
    for value, expected in [("1", True), ("true", True), ("0", False), ("", False), ("no", False)]:
        monkeypatch.setenv("STREAMEVAL_ALLOW_WEAKER_SANDBOX", value)
        assert sandbox.allow_weaker_sandbox() is expected


@pytest.mark.parametrize("profile", ["python-child", "node-host"])
def test_seccomp_program_shape(profile: str) -> None:
    program = _confine.seccomp_program(profile)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS
    # the last instruction allows; the first loads the architecture
    assert program[-8:-4] == bytes([0x06, 0x00, 0x00, 0x00]) and program[-4:] == (0x7FFF0000).to_bytes(
        4, "little"
    )
