"""The detectors, table-driven: true positives and the look-alikes they must leave; the redactor's
invariants under Hypothesis (redacting twice changes nothing; nothing detected is left)."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.features.redact import (
    DETECTORS,
    RedactConfig,
    Redactor,
    Shape,
    _detectors,
    cn_id_valid,
    iban_valid,
    luhn_valid,
)

FOUND = [
    ("email", "write to bob.smith@example.com today", "bob.smith@example.com"),
    ("email", "邮箱zhang.san@qq.com谢谢", "zhang.san@qq.com"),
    ("phone", "手机13912345678，", "13912345678"),
    ("phone", "call +86 139 1234 5678", "+86 139 1234 5678"),
    ("phone", "UK office +44 20 7946 0958.", "+44 20 7946 0958"),
    ("phone", "call (555) 123-4567 now", "(555) 123-4567"),
    ("phone", "电话：010-12345678", "010-12345678"),
    ("cn_id", "身份证11010519491231002X。", "11010519491231002X"),
    ("card", "card 4111 1111 1111 1111 ok", "4111 1111 1111 1111"),
    ("card", "amex 3782-822463-10005", "3782-822463-10005"),
    ("card", "visa 4012888888881881", "4012888888881881"),
    ("card", "Diners 3056 930902 5904 ok", "3056 930902 5904"),  # 4-6-4
    ("card", "大来卡3056-930902-5904。", "3056-930902-5904"),
    ("card", "amex 3782 822463 10005", "3782 822463 10005"),  # 4-6-5
    ("card", "diners 3056 9309 0259 04", "3056 9309 0259 04"),  # also in 4s
    ("ip", "server at 10.20.30.40 now", "10.20.30.40"),
    ("ip", "Version 2 calls 10.20.30.40 first", "10.20.30.40"),  # words between: not a version
    ("ip", "第二台服务器 10.2.3.4 下线", "10.2.3.4"),
    ("iban", "IBAN GB82 WEST 1234 5698 7654 32.", "GB82 WEST 1234 5698 7654 32"),
    ("iban", "to DE89370400440532013000", "DE89370400440532013000"),
    ("ip", "from 203.0.113.77 at", "203.0.113.77"),
    ("ip", "host 2001:db8::8a2e:370:7334 up", "2001:db8::8a2e:370:7334"),
    ("url_credentials", "postgres://admin:s3cret@db.local/x", "admin:s3cret"),
    (
        "jwt",
        "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0In0.abcDEF_123-xyz",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0In0.abcDEF_123-xyz",
    ),
    ("api_key", "aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("api_key", "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abcdefghijklmnopqrstuvwx"),
    ("api_key", "key sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv"),
    ("api_key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("api_key", "token xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
    ("api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    ("api_key", "stripe sk_live_abcdefghijklmnopqrstuvwx", "sk_live_abcdefghijklmnopqrstuvwx"),
    (
        "private_key",
        "x -----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY----- y",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----",
    ),
    ("private_key", "cut: -----BEGIN PRIVATE KEY-----\nMIIabc", "-----BEGIN PRIVATE KEY-----\nMIIabc"),
]

LEFT = [
    ("order number 1234567812345678", "card"),  # fails Luhn
    ("order 2026112712345678", "card"),  # no issuer starts with 20
    ("card-like 4111 111 1111 1111 1", "card"),  # groups are not 4-4-4-4
    ("at 2026-11-27 15:30:45", "phone"),
    ("epoch 1732694400123 ms", "phone"),
    ("ticket 20261127153045", "phone"),
    ("version 10.0.0.1", "ip"),
    ("see section 3.1.4.1 of the spec", "ip"),
    ("依据第 2.3.1.4 节办理", "ip"),
    ("参见第2.3.1.4条", "ip"),
    ("Clause 12.4.2.1 limits it", "ip"),
    ("§ 4.2.1.3 applies", "ip"),
    ("the latest version is 2.4.1.0", "ip"),
    ("upgrade from 4.2.1.0 to 4.2.1.1", "ip"),
    ("请升级到 3.2.1.0 版", "ip"),
    ("installed 0.9.1.2 yesterday", "ip"),  # 0.x.x.x is no host's address
    ("diners 3056 930902 5905", "card"),  # fails Luhn
    ("visa-like 4111 111111 1114", "card"),  # Luhn passes, but no Visa card has 14 digits
    ("order 3112345678901230", "card"),  # passes Luhn, but no issuer starts with 31
    ("v1.2.3.4", "ip"),
    ("版本 1.2.3.4", "ip"),
    ("localhost 127.0.0.1 and ::1", "ip"),
    ("time 12:30:45", "ip"),
    ("std::vector<int>", "ip"),
    ("id 110105194912310021", "cn_id"),  # wrong check digit
    ("id 11010519491332002X", "cn_id"),  # no 13th month
    ("DE89370400440532013001", "iban"),  # fails mod-97
    ("user@localhost", "email"),
    ("eyJub3QiOiJqd3QifQ.eyJ4IjoxfQ.sig", "jwt"),  # header without alg
    ("sk-learn is a library", "api_key"),
    ("https://example.com/a:b@c", "url_credentials"),
]


@pytest.mark.parametrize(("detector", "text", "value"), FOUND)
def test_finds(detector: str, text: str, value: str) -> None:
    found = [text[s:e] for s, e, _ in DETECTORS[detector].find(text, Shape(text), 1.0)]
    assert found == [value]
    redacted, counts = Redactor(RedactConfig(detectors=[detector])).text(text)  # type: ignore[list-item]
    assert value not in redacted and counts == {DETECTORS[detector].kind: 1}


@pytest.mark.parametrize(("text", "detector"), LEFT)
def test_leaves_look_alikes(text: str, detector: str) -> None:
    shape = Shape(text)
    assert not DETECTORS[detector].may_hold(shape) or DETECTORS[detector].find(text, shape, 1.0) == []


def test_checks() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert cn_id_valid("11010519491231002X") and not cn_id_valid("110105194912310021")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")


def test_allow_list_and_custom_patterns() -> None:
    config = RedactConfig(
        allow=["support@example.com"],
        patterns=[{"kind": "ORDER_REF", "pattern": r"REF-\d{8}"}],  # type: ignore[list-item]
    )
    text, counts = Redactor(config).text("mail support@example.com or bob@example.com about REF-12345678")
    assert text == "mail support@example.com or [EMAIL_1] about [ORDER_REF_1]"
    assert counts == {"EMAIL": 1, "ORDER_REF": 1}


def test_custom_pattern_timeout_withholds_the_text() -> None:
    config = RedactConfig(patterns=[{"kind": "SLOW", "pattern": r"(a|aa)+$"}], timeout_ms=20)  # type: ignore[list-item]
    text, counts = Redactor(config).text("a" * 60 + "b")
    assert text == "[WITHHELD]" and counts == {"WITHHELD": 1}


_REDACTOR = Redactor(RedactConfig(patterns=[{"kind": "TICKET", "pattern": r"T-\d{4}"}]))  # type: ignore[list-item]
_PIECES = st.sampled_from(
    [
        "bob@example.com",
        "13912345678",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
        "11010519491231002X",
        "DE89370400440532013000",
        "203.0.113.77",
        "fe80::1",
        "AKIAIOSFODNN7EXAMPLE",
        "T-1234",
        "[EMAIL_1]",
        "2026-11-27",
        "v1.2.3.4",
        "订单",
        " ",
        "\n",
        ",",
        "@",
        ".",
        ":",
        "-",
    ]
)
_TEXTS = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once, _ = _REDACTOR.text(text)
    twice, counts = _REDACTOR.text(once)
    assert twice == once and counts == {}


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_nothing_detected_is_left(text: str) -> None:
    spans = [text[start:end] for start, end, _, value in _REDACTOR.spans(text) if value is not None]
    once, _ = _REDACTOR.text(text)
    for value in set(
        spans
    ):  # each found occurrence is gone (the same letters elsewhere, undetected, may stay)
        assert once.count(value) <= text.count(value) - spans.count(value)
    assert [v for *_, v in _REDACTOR.spans(once) if v is not None] == []


_NUMBERS = st.text(alphabet="0123456789" * 4 + " -.()+:/@xX_A\n版", max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_TEXTS, _NUMBERS))
def test_both_engines_find_the_same(text: str) -> None:
    """Texts up to TIMED_CHARS run the built-in patterns through ``re``, longer ones through ``regex``
    (with the timeout): the same values either way."""
    from streameval.features.redact import _detectors

    short = _REDACTOR.spans(text)
    with patch.object(_detectors, "TIMED_CHARS", -1):
        assert _REDACTOR.spans(text) == short


def _runs_by_pattern(text: str) -> list[tuple[int, int]]:
    """Shape.numbers as the one pattern it stands for finds them (its docstring)."""
    import re

    shape, out = Shape(text).shape, []
    for m in re.finditer(rb"0(?:[ ().-]{0,2}0){3,}", shape):
        lo, hi = max(0, m.start() - 4), min(len(shape), m.end() + 4)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


@settings(max_examples=500, deadline=None)
@given(st.one_of(_NUMBERS, st.text(alphabet="0 ().-x", max_size=40), _TEXTS))
def test_number_windows_are_the_runs_of_the_pattern(text: str) -> None:
    assert Shape(text).numbers() == _runs_by_pattern(text)


_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AIza", "sk-", "sk_live_", "rk_live_", "xox")
_PREFIXES += ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*_PREFIXES, "A", "I", "x", "-", "_", "k", " ", "版", "AA"]), max_size=30).map(
        "".join
    )
)
def test_key_windows_start_at_every_prefix(text: str) -> None:
    """Shape.keys skips a prefix's scan only when a byte it holds is missing: the same windows as scanning
    for every prefix."""
    starts = sorted(i for p in _PREFIXES for i in range(len(text)) if text.startswith(p, i))
    out: list[tuple[int, int]] = []
    for at in starts:
        hi = min(len(text), at + 300)
        if out and at <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((at, hi))
    assert Shape(text).keys() == out


def _spans_one_by_one(redactor: Redactor, text: str) -> list[tuple[int, int, str, str | None]]:
    """The built-in values of ``text`` found as the redactor's rule states it: each chosen detector in
    priority order on its own, a value overlapping one taken first left to the first."""
    taken: list[tuple[int, int, str, str | None]] = []
    shape = Shape(text)
    for name in redactor.config.chosen_detectors:
        detector = DETECTORS[name]
        if not detector.may_hold(shape):
            continue
        for start, end, value in detector.find(text, shape, 1.0):
            if all(end <= s or e <= start for s, e, _, _ in taken):
                taken.append((start, end, detector.kind, value))
    return sorted(taken)


_NUMERIC_CHOICES = [
    Redactor(RedactConfig(detectors=chosen))  # type: ignore[arg-type]
    for chosen in (None, ["card", "phone"], ["cn_id", "phone", "ip"], ["phone"], ["email", "card"])
]


@settings(max_examples=400, deadline=None)
@given(st.one_of(_TEXTS, _NUMBERS, st.text(alphabet="0123456789 -+()", min_size=15, max_size=60)))
def test_numeric_detectors_in_one_pass_find_what_each_finds(text: str) -> None:
    """The redactor runs the chosen numeric detectors in one pass over the number windows
    (numeric_finder); it takes the values taking each detector's in turn takes."""
    for redactor in _NUMERIC_CHOICES:
        assert redactor.spans(text) == _spans_one_by_one(redactor, text)


_CARD_LIKE = st.lists(st.text(alphabet="0123456789", min_size=1, max_size=7), min_size=2, max_size=6).flatmap(
    lambda groups: st.lists(st.sampled_from(" -"), min_size=len(groups) - 1, max_size=len(groups) - 1).map(
        lambda seps: "".join(g + s for g, s in zip(groups, [*seps, ""], strict=True))
    )
)


@settings(max_examples=300, deadline=None)
@given(_CARD_LIKE)
def test_card_groups_generated(text: str) -> None:
    test_card_groups(text)


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1111",
        "3782 822463 10005",
        "4111-1111-1111-1111-123",
        "4111 111 1111 1111 1",
        "4111 1111 1111 11 11",
        "3056 930902 5904",
        "3056 930902 590",
    ],
)
def test_card_groups(text: str) -> None:
    """A separated card number counts in its printed groups: 4-4-4-4 (the last group shorter or longer),
    Amex's 4-6-5 or Diners Club's 4-6-4."""
    groups = [len(g) for g in text.replace("-", " ").split(" ")]
    printed = groups[0] == 4 and (all(g == 4 for g in groups[1:-1]) or groups[1:] in ([6, 5], [6, 4]))
    assert (_detectors._CARD_GROUPS.fullmatch(text) is not None) == printed
