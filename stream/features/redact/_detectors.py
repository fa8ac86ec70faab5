"""The built-in detectors: a pattern that finds candidates and a check that keeps only real values.

Each detector is a name (:data:`DETECTORS`, also the ``Literal`` :data:`DetectorName`), the kind its
placeholders carry (``[EMAIL_1]``), a cheap test that skips texts which cannot hold a value (``'@' in
text``), and a function ``text -> [(start, end, normalised value)]``. A value is normalised so that the
same number written with or without separators gets the same placeholder.

The checks, so that look-alikes stay (docs/redact.md has the corpus and its figures):

* ``card``: 13-19 digits, a known issuer prefix and a length its cards have, the Luhn check, and when
  separated the printed groups (4-4-4-4, Amex 4-6-5, Diners Club 4-6-4).
* ``cn_id``: the 18-digit resident ID: a birth date that exists and the ISO 7064 MOD 11-2 check digit.
* ``iban``: the country's length and the ISO 13616 mod-97 check.
* ``phone``: mainland China mobile ``1[3-9]`` + 9 digits (``+86`` optional), China landlines with their
  ``0`` area code and a dash, North American ``(555) 123-4567`` / ``555-123-4567``, and international
  numbers only with a leading ``+`` (8-15 digits): a bare run of digits is never a phone.
* ``ip``: what :mod:`ipaddress` accepts, except loopback, unspecified and 0.x.x.x addresses (not about
  anyone), and not a version or section number by its words (after ``v`` / ``version`` / ``版本`` /
  ``section`` / ``clause`` / ``第``..., before ``节`` / ``条``...).
* ``jwt``: three base64url parts whose first decodes to a JSON object with ``alg``.
* ``api_key``: the documented prefixes of AWS, OpenAI, Anthropic, GitHub, Slack, Google and Stripe keys.
* ``url_credentials``: the ``user:password`` of a URL (the host stays); ``private_key``: a PEM private
  key block, to its end line or, when cut, to the end of the text.

Patterns are written so that each start position costs a bounded number of steps (linear time). A call
that scans more than :data:`TIMED_CHARS` characters (a whole long text, or a window that long) runs
through the ``regex`` package like every pattern of the project, with the caller's timeout. Shorter
scans run through the standard library's ``re``, which cannot be timed but needs no timer: a linear scan
of a few KB cannot run long, and ``re`` calls cost about half of what ``regex`` calls do on these short
windows (the timer alone, ~6 µs a call, would be most of the scan); both engines give the same matches
(tests/features/redact: a differential test). Where only ``regex`` has what a pattern needs (a
look-behind of variable width), it runs untimed on short scans. Most patterns scan only windows: each
numeric pattern the digit windows of the text's :class:`Shape` that can hold one of its values (13
digits or more for a card, 8 for a phone, 17 in a row for a resident ID, three dots for an IPv4
address), the key pattern 300 characters from each key prefix, the IBAN pattern 42 from each ``AA00``,
the email's domain ~540 from each ``@``; so an event of long texts pays for the timer only where a
pattern reads the whole text (PEM keys, JWTs, URL credentials, IPv6), and only when the text holds that
pattern's literal. Custom patterns (streameval.features.redact._redactor) always run with the timeout.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Literal, get_args

import orjson
import regex

from ._checks import cn_id_valid, iban_valid, luhn_valid
from ._shape import Shape

__all__ = [
    "DETECTORS",
    "Detector",
    "DetectorName",
    "Found",
    "Shape",
    "cn_id_valid",
    "iban_valid",
    "luhn_valid",
]

DetectorName = Literal[
    "private_key",
    "jwt",
    "url_credentials",
    "api_key",
    "email",
    "iban",
    "cn_id",
    "card",
    "phone",
    "ip",
]

#: (start, end, normalised value) of one value found in a text
Found = tuple[int, int, str]
#: texts longer than this run the built-in patterns with the timeout (module docstring)
TIMED_CHARS = 4096
Match = regex.Match[str] | re.Match[str]  # a match of either engine (module docstring)


@dataclass(frozen=True)
class Detector:
    name: str
    kind: str  # the placeholder's kind: EMAIL in [EMAIL_1]
    may_hold: Callable[[Shape], bool]  # False: the text cannot hold a value (skip the pattern)
    find: Callable[[str, Shape, float | None], list[Found]]  # (text, its shape, timeout in seconds)


# -- patterns ---------------------------------------------------------------------------------
Windows = Callable[[Shape], list[tuple[int, int]]] | None
#: (the shape's bytes, start, end) -> False: no value of the detector can be in that window (skip it)
Needs = Callable[[bytes, int, int], bool] | None


def _finder(
    pattern: str, check: Callable[[Match], str | None], windows: Windows = None, needs: Needs = None
) -> Callable[[str, Shape, float | None], list[Found]]:
    # ASCII: a digit is 0-9 and a word character A-Za-z0-9_, so 手机13912345678 ends a word before the number
    timed = regex.compile(pattern, regex.ASCII)
    fast = _untimed(pattern)

    def find(text: str, shape: Shape, timeout: float | None) -> list[Found]:
        out: list[Found] = []
        spans = [(0, len(text))] if windows is None else windows(shape)
        for lo, hi in spans:
            if needs is not None and not needs(shape.shape, lo, hi):
                continue
            if hi - lo > TIMED_CHARS:
                matches: Iterable[Match] = timed.finditer(text, lo, hi, timeout=timeout)
            elif fast is not None:
                matches = fast.finditer(text, lo, hi)
            else:
                matches = timed.finditer(text, lo, hi)
            for match in matches:
                value = check(match)
                if value is not None:
                    out.append((match.start(), match.end(), value))
        return out

    return find


def _untimed(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` in the standard library's engine, for scans up to :data:`TIMED_CHARS` (module docstring);
    None when it has what only ``regex`` has (a look-behind of variable width)."""
    try:
        return re.compile(pattern, re.ASCII)
    except re.error:
        return None


def _digits_at_least(n: int) -> Callable[[bytes, int, int], bool]:
    """A window holds a value only with ``n`` digits or more (a prefilter: one count in C)."""
    return lambda shape, lo, hi: shape.count(b"0", lo, hi) >= n


def _digit_run(n: int) -> Callable[[bytes, int, int], bool]:
    """A window holds a value only with ``n`` digits in a row."""
    run = b"0" * n
    return lambda shape, lo, hi: shape.find(run, lo, hi) >= 0


_SEPARATORS = str.maketrans("", "", " -.()+")


def _digits(text: str) -> str:
    """The digits of a number the patterns matched (digits and `` -.()+`` only)."""
    return text.translate(_SEPARATORS)


def _card(m: Match) -> str | None:
    text = m.group()
    digits = _digits(text)
    if not 13 <= len(digits) <= 19 or not luhn_valid(digits):
        return None
    lengths = _ISSUERS.get(digits[:2])
    if lengths.__class__ is dict:  # an issuer's range starts within these two digits: look at four
        lengths = lengths.get(digits[:4])
    if lengths is None or len(digits) not in lengths:
        return None  # no issuer starts so, or none of its cards has this many digits
    if len(digits) != len(text) and _CARD_GROUPS.fullmatch(text) is None:
        return None  # separated, but not in the printed groups (4-4-4-4, 4-6-5 Amex, 4-6-4 Diners, 4-4-4-4-3)
    return digits


Lengths = range | tuple[int, ...]


def _issuer_table() -> dict[str, Lengths | dict[str, Lengths]]:
    """The first two digits of a card number -> the lengths its issuer's cards have, or, where issuers
    differ by the next digits, a table of the first four (one or two lookups a candidate)."""
    any_length = range(13, 20)  # Maestro's 12-19, from the 13 digits the pattern needs
    table: dict[str, Lengths] = {"4": (13, 16, 19), "5": any_length, "6": any_length}  # Visa
    table |= {str(p): (16,) for p in range(51, 56)} | {str(p): (16,) for p in range(2221, 2721)}  # Mastercard
    table |= {"34": (15,), "37": (15,)}  # American Express
    table |= {p: range(14, 20) for p in ("300", "301", "302", "303", "304", "305", "3095", "36", "38", "39")}
    table |= {str(p): range(16, 20) for p in range(3528, 3590)}  # JCB
    table |= {"6011": range(16, 20), "65": range(16, 20)} | {str(p): range(16, 20) for p in range(644, 650)}
    table |= {"62": range(16, 20)}  # UnionPay (Discover above, Diners Club before)

    def longest(prefix: str) -> Lengths | None:  # the longest listed prefix of ``prefix`` wins
        return next((table[prefix[:n]] for n in (4, 3, 2, 1) if prefix[:n] in table), None)

    out: dict[str, Lengths | dict[str, Lengths]] = {}
    for two in map(str, range(10, 100)):
        fours = {four: longest(four) for four in (f"{two}{n:02d}" for n in range(100))}
        if len({id(lengths) for lengths in fours.values()}) > 1:
            out[two] = {four: lengths for four, lengths in fours.items() if lengths is not None}
        elif (lengths := fours[f"{two}00"]) is not None:
            out[two] = lengths
    return out


_ISSUERS = _issuer_table()

# the groups of a separated card number: 4, then 4s, then the last of any length; or 4-6-5 (Amex) and
# 4-6-4 (Diners Club), whose lengths the issuer table checks (one match in C instead of splitting the text)
_CARD_GROUPS = re.compile(r"\d{4}(?:[ -]\d{4})*[ -]\d+|\d{4}[ -]\d{6}[ -]\d{4,5}", re.ASCII)


def _cn_id(m: Match) -> str | None:
    number = m.group().upper()
    return number if cn_id_valid(number) else None


def _iban(m: Match) -> str | None:
    value = m.group().replace(" ", "").upper()
    return value if iban_valid(value) else None


def _phone(m: Match) -> str | None:
    text = m.group()
    digits = _digits(text)
    if text.startswith("+") and not 8 <= len(digits) <= 15:
        return None
    if digits.startswith("86") and len(digits) == 13:
        digits = digits[2:]  # +86 138... and 138... are the same number
    return digits


# A dotted number is a version or a section, not an address, after one of these words (a few linking words,
# or the version it goes from, between: "version is 2.4.1.0", "upgrade from 4.2.1.0 to 4.2.1.1"), or
# before 节 / 条 / 款 / 章 / 版 ("第 2.3.1.4 节")
_NUMBERED_BEFORE = regex.compile(
    r"(?i)(?:\bv|\bversion|\bver\.?|\brelease|\bbuild|\bupdate[ds]?|\bupgrade[ds]?|\bpatch(?:ed)?|\bfirmware"
    r"|\bsection|\bsec\.|§|\bclause|\barticle|\bart\.|\bparagraph|\bpara\.|\bchapter|\bappendix|\bannex"
    r"|版本号?|第|条款|章节|小节)"
    r"(?:[\s:=：#]*(?:is|was|to|from|no\.?|number|->|→|是|为|到|从|\d+(?:\.\d+)+(?![\d.])))*[\s:=：#]*$"
)
_NUMBERED_AFTER = regex.compile(r"\s*(?:节|条|款|章|版)")
_CONTEXT = 40  # characters read before a dotted number for those words


# a literal of each word above but "v" (the pattern tries every position of the window, ~1 µs each; most
# addresses have none of these before them, and a few `in` tests in C rule them out)
_NUMBERING_WORDS = (
    "ver",
    "release",
    "build",
    "updat",
    "upgrad",
    "patch",
    "firmware",
    "sec",
    "§",
    "clause",
    "article",
    "art.",
    "para",
    "chapter",
    "appendix",
    "annex",
    "版本",
    "第",
    "条款",
    "章节",
    "小节",
)


def _numbered(text: str, start: int, end: int) -> bool:
    """Whether the dotted number at ``start:end`` is a version or a section number by the words around it."""
    if _NUMBERED_AFTER.match(text, end) is not None:
        return True
    window = text[max(0, start - _CONTEXT) : start]
    lowered = window.lower()
    if not any(word in lowered for word in _NUMBERING_WORDS) and window.rstrip(" :=：#")[-1:] not in (
        "v",
        "V",
    ):
        return False
    return _NUMBERED_BEFORE.search(window) is not None


def _ip_finder() -> Callable[[str, Shape, float | None], list[Found]]:
    v4_pattern = r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)"
    v6_pattern = r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"
    v4, v6 = regex.compile(v4_pattern, regex.ASCII), regex.compile(v6_pattern, regex.ASCII)
    v4_fast, v6_fast = re.compile(v4_pattern, re.ASCII), re.compile(v6_pattern, re.ASCII)

    def find(text: str, shape: Shape, timeout: float | None) -> list[Found]:
        out: list[Found] = []
        # v4 in the number windows, v6 over the whole text: each timed when it scans more than TIMED_CHARS
        v6_iter: Callable[..., Iterable[Match]] = (
            v6_fast.finditer if len(text) <= TIMED_CHARS else partial(v6.finditer, timeout=timeout)
        )
        data = shape.ascii
        if b"." in data:
            for lo, hi in shape.numbers():
                if data.count(b".", lo, hi) < 3:
                    continue  # an IPv4 address has three dots
                scan: Callable[..., Iterable[Match]] = (
                    v4_fast.finditer if hi - lo <= TIMED_CHARS else partial(v4.finditer, timeout=timeout)
                )
                for m in scan(text, lo, hi):
                    if _numbered(text, m.start(), m.end()):
                        continue
                    ip = _address(m.group())
                    if ip is not None:
                        out.append((m.start(), m.end(), ip))
        if b":" in data and (b"::" in data or data.count(b":") >= 7):
            for m in v6_iter(text):
                found = m.group()
                # "fe80::1" yes; "a::b" (code), "12:30:45" (a time: not an address anyway) no
                if len(found) < 3 or not any(ch.isdigit() for ch in found):
                    continue
                ip = _address(found)
                if ip is not None:
                    out.append((m.start(), m.end(), ip))
        return out

    return find


def _address(text: str) -> str | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if ip.is_loopback or ip.is_unspecified or (ip.version == 4 and ip.packed[0] == 0):
        return None  # 0.0.0.0/8 is no host's address (a version: 0.9.1.2)
    return ip.compressed


def _jwt(m: Match) -> str | None:
    head = m.group().split(".", 1)[0]
    try:
        header = orjson.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError):
        return None
    return m.group() if isinstance(header, dict) and "alg" in header else None


def _whole(m: Match) -> str | None:
    return m.group()


def _holds(*literals: bytes) -> Callable[[Shape], bool]:
    """A prefilter: whether the text holds one of ``literals``. Each of the literal's bytes is looked for
    first (memchr, ~20x faster than a search for several bytes over a long text): most texts lack one."""
    guarded = [([bytes([b]) for b in sorted(set(literal))], literal) for literal in literals]

    def holds(shape: Shape) -> bool:
        data = shape.ascii
        for guard, literal in guarded:
            for byte in guard:
                if byte not in data:
                    break
            else:
                if literal in data:
                    return True
        return False

    return holds


_DOMAIN_PATTERN = r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z_-])"
_DOMAIN_FAST = re.compile(_DOMAIN_PATTERN, re.ASCII)
# a local part's characters -> "a", every other byte -> " ": the local part before an @ is the run of "a"
_LOCAL_TABLE = bytes(
    ord("a") if chr(b) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-" else ord(" ")
    for b in range(256)
)
_LOCAL_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NOT_BEFORE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.%+-")


def _emails(text: str, shape: Shape, timeout: float | None) -> list[Found]:
    """From each ``@``: the local part read backwards (1-64 characters, starting with a letter or digit, not
    after a word character), the domain forwards: two anchored reads per ``@`` instead of a pattern
    tried at every letter of the text."""
    out: list[Found] = []
    data = shape.ascii
    at = data.find(b"@")
    while at > 0:
        lo = max(0, at - 65)
        start = lo + data[lo:at].translate(_LOCAL_TABLE).rfind(b" ") + 1  # up to 65 local characters
        domain = _DOMAIN_FAST.match(text, at) if start < at else None  # reads 540 characters at most
        if domain is not None:
            first = start
            while start < at and data[start] not in _LOCAL_START:
                start += 1  # a local part starts with a letter or digit (".bob" is "bob" after a dot: no)
            if start == first and at - start <= 64 and (start == 0 or data[start - 1] not in _NOT_BEFORE):
                out.append((start, domain.end(), text[start : domain.end()].lower()))
        at = data.find(b"@", at + 1)
    return out


_CN_ID_PATTERN = (
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
    r"(?![0-9A-Za-z])"
)
# every issuer prefix starts with 2-6
_CARD_PATTERN = r"(?<![\d-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\d]|-\d)"
_PHONE_PATTERN = (
    r"(?<![\w+])(?:"
    r"(?:\+?86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})"  # mainland China mobile
    r"|\+[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){1,5}[ .-]?\d{2,4}"  # international, with +
    r"|\(\d{3}\) ?\d{3}[-.]\d{4}|\d{3}[-.]\d{3}[-.]\d{4}"  # North American
    r"|0\d{2,3}-\d{7,8}"  # China landline with its area code
    r")(?![\w]|[-.]\d)"
)


DETECTORS: dict[str, Detector] = {
    "private_key": Detector(
        "private_key",
        "PRIVATE_KEY",
        _holds(b"PRIVATE KEY"),
        _finder(
            r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END)[^\x00]){0,100000}"
            r"(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----)?",
            _whole,
        ),
    ),
    "jwt": Detector(
        "jwt",
        "JWT",
        _holds(b"eyJ"),
        _finder(r"(?<![\w-])eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{0,}(?![\w-])", _jwt),
    ),
    "url_credentials": Detector(
        "url_credentials",
        "URL_CREDENTIALS",
        lambda shape: b"@" in shape.ascii and b":" in shape.ascii and b"://" in shape.ascii,
        # only the user:password part, so the judge still sees which host
        _finder(r"(?<=\b[A-Za-z][A-Za-z0-9+.-]{0,15}://)[^\s/?#@:]{1,256}:[^\s/?#@]{1,256}(?=@)", _whole),
    ),
    "api_key": Detector(
        "api_key",
        "API_KEY",
        lambda shape: bool(shape.keys()),
        _finder(
            r"(?<![\w-])(?:"
            r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"
            r"|sk-ant-[A-Za-z0-9_-]{20,}"
            r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
            r"|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{35}"
            r"|(?:sk|rk)_live_[0-9A-Za-z]{24,}"
            r")(?![\w-])",
            _whole,
            Shape.keys,
        ),
    ),
    "email": Detector(
        "email",
        "EMAIL",
        _holds(b"@"),
        _emails,
    ),
    "iban": Detector(
        "iban",
        "IBAN",
        lambda shape: shape.two_capitals() and b"AA00" in shape.shape,
        _finder(
            r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w])",
            _iban,
            Shape.iban_starts,
        ),
    ),
    "cn_id": Detector(
        "cn_id",
        "CN_ID",
        lambda shape: bool(shape.numbers()),
        _finder(_CN_ID_PATTERN, _cn_id, Shape.numbers, _digit_run(17)),
    ),
    "card": Detector(
        "card",
        "CARD",
        lambda shape: bool(shape.numbers()),
        _finder(_CARD_PATTERN, _card, Shape.numbers, _digits_at_least(13)),
    ),
    "phone": Detector(
        "phone",
        "PHONE",
        lambda shape: bool(shape.numbers()),
        _finder(_PHONE_PATTERN, _phone, Shape.numbers, _digits_at_least(8)),
    ),
    "ip": Detector("ip", "IP", lambda shape: b"." in shape.ascii or b":" in shape.ascii, _ip_finder()),
}

assert tuple(DETECTORS) == get_args(DetectorName)  # one list, in priority order


# -- the numeric detectors in one pass -------------------------------------------------------------
#: the numeric detectors, in priority order: (name, pattern, check, digits a window needs at least, digits
#: it needs in a row)
_NUMERIC = (
    ("cn_id", _CN_ID_PATTERN, _cn_id, 17, 17),
    ("card", _CARD_PATTERN, _card, 13, 0),
    ("phone", _PHONE_PATTERN, _phone, 8, 0),  # every kind has 8 digits or more (with "+": the check's 8-15)
)
NUMERIC = tuple(name for name, *_ in _NUMERIC)
#: (start, end, normalised value, kind) of one value a pass over several detectors found
FoundKind = tuple[int, int, str, str]


def numeric_finder(names: Iterable[str]) -> Callable[[str, Shape, float | None], list[FoundKind]]:
    """The numeric detectors of ``names`` (in priority order) in one pass over the number windows: each
    window's digits counted once, then each detector's pattern on it in priority order. What each
    pattern matches is what its own detector finds, and as the windows do not overlap, taking each
    window's values in priority order takes what taking each detector's values in turn does (the
    redactor's overlap rule; tests/features/redact pin it)."""
    chosen = set(names)
    scans = [
        (
            DETECTORS[name].kind,
            at_least,
            b"0" * in_row if in_row else b"",
            re.compile(pattern, re.ASCII),
            regex.compile(pattern, regex.ASCII),
            check,
        )
        for name, pattern, check, at_least, in_row in _NUMERIC
        if name in chosen
    ]
    least = min(at_least for _, at_least, *_ in scans)

    def find(text: str, shape: Shape, timeout: float | None) -> list[FoundKind]:
        out: list[FoundKind] = []
        data = shape.shape
        for lo, hi in shape.numbers():
            digits = data.count(b"0", lo, hi)
            if digits < least:
                continue
            for kind, at_least, run, fast, timed, check in scans:
                if digits < at_least or (run and data.find(run, lo, hi) < 0):
                    continue
                matches: Iterable[Match] = (
                    fast.finditer(text, lo, hi)
                    if hi - lo <= TIMED_CHARS
                    else timed.finditer(text, lo, hi, timeout=timeout)
                )
                for m in matches:
                    value = check(m)
                    if value is not None:
                        out.append((m.start(), m.end(), value, kind))
        return out

    return find
