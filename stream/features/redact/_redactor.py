"""The redactor: finds values with the chosen detectors and replaces them by placeholders.

One :class:`Scope` per event: within it the same value (normalised: ``138 0013 8000`` is ``13800138000``)
gets the same placeholder in every field and text, and each kind is numbered from 1 in order of first
appearance (input, output, expected, references, context). Modes:

* ``mask``: ``[EMAIL_1]`` - the kind and the index within the event;
* ``hash``: ``[EMAIL#1a2b3c4d]`` - the kind and the first 8 hex digits of HMAC-SHA256(key, kind:value): the
  same value gets the same placeholder in every event (to count repeats across events), and without the
  key nobody can test guesses (a phone number has only ~10^10 values);
* ``drop``: ``[REDACTED]`` - neither the kind nor which value.

Detectors run in priority order (:data:`~._detectors.DETECTORS`, then the custom patterns); a value
overlapping one already taken is left to the first. Allowed values are taken without replacement, so no
other detector cuts into them. A text already redacted comes out unchanged: no placeholder holds a value
any detector finds, and custom patterns never match inside a placeholder.

Fail closed: when a pattern runs past the timeout (only a custom pattern can), the whole text becomes
``[WITHHELD]`` (kind ``WITHHELD``): nothing unredacted leaves because a check gave up.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import regex

from ...blocks import RetrievalBlock
from ...errors import StreamEvalError
from ...models import RequestEvent
from ._config import RedactConfig
from ._detectors import DETECTORS, NUMERIC, Shape, numeric_finder

__all__ = ["WITHHELD", "Redactor", "Scope"]

WITHHELD = "[WITHHELD]"
# between the texts of one pass: a line break ends every value; NUL marks the joint (texts holding one
# are redacted one by one)
_JOINT_MARK = "\x00"
_JOINT = "\n\x00\n"
_DROPPED = "[REDACTED]"
_PLACEHOLDER = regex.compile(r"\[[A-Z][A-Z0-9_]{0,40}(?:_\d{1,6}|#[0-9a-f]{8})\]|\[REDACTED\]|\[WITHHELD\]")


class Redactor:
    """Built once per suite from its effective ``redact:`` block; ``key``: the ``hash`` mode's key."""

    def __init__(self, config: RedactConfig, *, key: bytes | None = None) -> None:
        if config.chosen_mode == "hash" and not key:
            raise ValueError("mode hash needs a key")
        self.config = config
        self.mode = config.chosen_mode
        self.fields = frozenset(config.chosen_fields)
        self._key = key or b""
        self._timeout = config.timeout_s
        # each detector as (may_hold, find, kind); the numeric ones chosen as one entry of kind None, whose
        # find gives each value's kind (numeric_finder: one pass over the number windows, same values)
        chosen = config.chosen_detectors
        numeric = [name for name in chosen if name in NUMERIC]
        self._detectors: list[tuple[Callable[[Shape], bool], Callable[..., list[Any]], str | None]] = []
        for name in chosen:
            if name not in NUMERIC:
                self._detectors.append((DETECTORS[name].may_hold, DETECTORS[name].find, DETECTORS[name].kind))
            elif name == numeric[0]:
                self._detectors.append((DETECTORS[name].may_hold, numeric_finder(numeric), None))
        self._custom = [(spec.kind, regex.compile(spec.pattern)) for spec in config.patterns or ()]
        self.custom = bool(self._custom)
        self._allow = frozenset(value.lower() for value in config.allow or ())

    def scope(self) -> Scope:
        return Scope(self)

    def text(self, text: str) -> tuple[str, dict[str, int]]:
        """``text`` redacted on its own (a scope of its own), and the count of each kind replaced."""
        scope = Scope(self)
        return scope.text(text), scope.counts

    def event(self, event: RequestEvent) -> tuple[RequestEvent, dict[str, int]]:
        """A copy of ``event`` with its chosen fields redacted in one scope (the event itself when nothing
        was found), and the count of each kind replaced. Rule evaluators keep the original."""
        scope = Scope(self)
        fields = self.fields
        # every text in one pass (Scope.texts), in the order placeholders are numbered
        texts: list[str] = []
        slots: list[tuple[str, int]] = []  # field, how many texts it has
        for name in ("input", "output", "expected"):
            value = getattr(event, name)
            if name in fields and value:
                texts.append(value)
                slots.append((name, 1))
        if "references" in fields and event.references:
            texts += event.references
            slots.append(("references", len(event.references)))
        context = None
        if "context" in fields and event.retrieval is not None:
            context = event.retrieval.model_dump(exclude_defaults=True)
            found = _strings(context)
            texts += found
            slots.append(("retrieval", len(found)))
        redacted = scope.texts(texts)
        if not scope.counts:
            return event, {}
        update: dict[str, Any] = {}
        at = 0
        for name, n in slots:
            if name == "references":
                update[name] = redacted[at : at + n]
            elif name == "retrieval":
                update[name] = RetrievalBlock.model_validate(_rebuilt(context, iter(redacted[at : at + n])))
            else:
                update[name] = redacted[at]
            at += n
        return event.model_copy(update=update), scope.counts

    # -- finding ----------------------------------------------------------------------------
    def spans(self, text: str) -> list[tuple[int, int, str, str | None]]:
        """(start, end, kind, normalised value; None: allowed, keep it) of the values in ``text``, in order.
        Raises TimeoutError when a pattern runs past the timeout."""
        taken: list[tuple[int, int, str, str | None]] = []
        timeout = self._timeout
        allow = self._allow
        shape = Shape(text)
        for may_hold, find, kind in self._detectors:
            if not may_hold(shape):
                continue
            found = find(text, shape, timeout)
            if kind is not None:
                found = [(start, end, value, kind) for start, end, value in found]
            for start, end, value, of in found:
                for s, e, _, _ in taken:
                    if start < e and s < end:
                        break  # overlaps a value taken first
                else:
                    allowed = allow and (value.lower() in allow or text[start:end].lower() in allow)
                    taken.append((start, end, of, None if allowed else value))
        if self._custom:
            placeholders = [m.span() for m in _PLACEHOLDER.finditer(text)] if "[" in text else []
            for kind, pattern in self._custom:
                for m in pattern.finditer(text, timeout=timeout):
                    start, end = m.span()
                    if end == start or not _free(taken, start, end):
                        continue
                    if any(s <= start and end <= e for s, e in placeholders):
                        continue  # an earlier redaction's placeholder: redacting it again changes nothing
                    allowed = allow and m.group().lower() in allow
                    taken.append((start, end, kind, None if allowed else m.group()))
        taken.sort()
        return taken

    def placeholder(self, kind: str, value: str, index: int) -> str:
        if self.mode == "mask":
            return f"[{kind}_{index}]"
        if self.mode == "hash":
            digest = hmac.new(self._key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
            return f"[{kind}#{digest[:8]}]"
        return _DROPPED


def _touches_word(text: str, spans: list[tuple[int, int, str, str | None]]) -> bool:
    """Whether a replaced span has an ASCII letter, digit or underscore right before or after it."""
    end_of_text = len(text)
    for start, end, _, value in spans:
        if value is not None and (
            (start > 0 and text[start - 1] in _WORD_CHARS) or (end < end_of_text and text[end] in _WORD_CHARS)
        ):
            return True
    return False


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _free(taken: Iterable[tuple[int, int, str, str | None]], start: int, end: int) -> bool:
    return all(end <= s or e <= start for s, e, _, _ in taken)


class _Crossed(StreamEvalError):  # control flow within Scope.texts, never raised out of it
    """A value found across the joint of two texts."""


class Scope:
    """One event's placeholders: the same value, the same placeholder (module docstring)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.counts: dict[str, int] = {}  # kind -> values replaced (every occurrence)
        self._given: dict[tuple[str, str], str] = {}  # (kind, value) -> placeholder
        self._next: dict[str, int] = {}  # kind -> the last index given

    def texts(self, texts: list[str]) -> list[str]:
        """:meth:`text` of each of ``texts``, found in one pass over them joined: the detectors' fixed
        cost is paid once, not per text (an event has 3-4 short texts). Every pattern stops at the line
        breaks around the joint as at the end of a text; should a value still cross one (a URL's
        password split between two fields), the texts are redacted one by one."""
        if len(texts) < 2:
            return [self.text(t) for t in texts]
        joined = _JOINT.join(texts)
        if joined.count(_JOINT_MARK) != len(texts) - 1:  # a text holds a NUL
            return [self.text(t) for t in texts]
        # a fresh scope (an event's) has nothing to save: it goes back to empty
        fresh = not (self.counts or self._given or self._next)
        saved = ({}, {}, {}) if fresh else (dict(self.counts), dict(self._given), dict(self._next))
        try:
            joined = self.text(joined, joined=True)
        except _Crossed:
            self.counts, self._given, self._next = saved
            return [self.text(t) for t in texts]
        if joined == WITHHELD:
            return [WITHHELD] * len(texts)
        return joined.split(_JOINT)

    def text(self, text: str, *, joined: bool = False) -> str:
        # again while a replacement may have shown a value: one that touched a letter or digit can end a
        # word that hid a value (bob@x.comT-1 with a custom T-\d pattern), and a text already redacted must
        # come out unchanged. A replacement between spaces or punctuation changes no boundary, and the
        # placeholders hold no value, so most texts take one pass.
        for _ in range(4):
            try:
                spans = self.redactor.spans(text)
            except TimeoutError:
                self.counts["WITHHELD"] = self.counts.get("WITHHELD", 0) + 1
                return WITHHELD
            if joined:
                for start, end, _, _ in spans:
                    if text.find(_JOINT_MARK, start, end) >= 0:
                        raise _Crossed
            replaced = self._replace(text, spans) if spans else text
            if replaced is text:
                return text
            if not self.redactor.custom and not _touches_word(text, spans):
                return replaced
            text = replaced
        return WITHHELD  # still changing after 4 passes: withheld rather than risk a value

    def _replace(self, text: str, spans: list[tuple[int, int, str, str | None]]) -> str:
        parts: list[str] = []
        at = 0
        given, counts = self._given, self.counts
        for start, end, kind, value in spans:
            if value is None:
                continue
            parts.append(text[at:start])
            parts.append(given.get((kind, value)) or self._placeholder(kind, value))
            at = end
            counts[kind] = counts.get(kind, 0) + 1
        if not parts:
            return text
        parts.append(text[at:])
        return "".join(parts)

    def _placeholder(self, kind: str, value: str) -> str:
        given = self._given.get((kind, value))
        if given is None:
            index = self._next[kind] = self._next.get(kind, 0) + 1
            given = self._given[(kind, value)] = self.redactor.placeholder(kind, value, index)
        return given


def _strings(value: Any) -> list[str]:
    """The strings in a dumped block (the judges' ``context``), in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _rebuilt(value: Any, strings: Iterator[str]) -> Any:
    """``value`` with its strings replaced, in :func:`_strings`' order, by ``strings``."""
    if isinstance(value, str):
        return next(strings)
    if isinstance(value, list):
        return [_rebuilt(v, strings) for v in value]
    if isinstance(value, dict):
        return {k: _rebuilt(v, strings) for k, v in value.items()}
    return value
