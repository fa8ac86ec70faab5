"""What the engine calls: one :class:`Redactors` per pipeline, built only when the suite file has ``redact:``.

* :meth:`Redactors.judged`: the event the judges are asked about (events and session threads), and the
  counts per kind that the result records;
* :meth:`Redactors.texts`: review items' input and output;
* :meth:`Redactors.result`: a result whose texts (reasons, judge reasoning) go into drill-down examples,
  which alerts point at; :meth:`Redactors.result_document` the same texts of a stored result's JSON (the
  full result the dashboard and alert links show, ``GET /api/v1/results/{id}``);
* :meth:`Redactors.dead_letter`: a dead letter's raw bytes and reason under ``dead_letters``;
  :meth:`Redactors.letter`: the same for a dead letter already made (the feedback topic's: labels that
  are not labels, labels that never joined).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from ... import telemetry
from ..._util import clip
from ...errors import ConfigError, ConfigIssue, UsageError
from ...models import DeadLetter, DeadLetterTruncation, GradedResult, RequestEvent
from ._config import RedactConfig, RedactOverride, effective, hash_key, key_path
from ._redactor import Redactor, Scope

__all__ = ["Redactors", "build_redactors", "count_redactions", "redact_command", "redact_raw"]


_COUNTERS: dict[str, Any] = {}  # kind -> its child counter (labels() costs more than the increment)


def count_redactions(counts: Mapping[str, int]) -> None:
    """Add ``counts`` (kind -> values) to ``streameval_redactions_total``."""
    for kind, n in counts.items():
        counter = _COUNTERS.get(kind)
        if counter is None:
            counter = _COUNTERS[kind] = telemetry.REDACTIONS.labels(kind)
        counter.inc(n)


class Redactors:
    """The suites' redactors (by suite or session name) and the top-level one (dead letters)."""

    def __init__(self, by_suite: Mapping[str, Redactor], top: Redactor | None, dead_letters: str) -> None:
        self.by_suite = dict(by_suite)
        self.top = top
        self.dead_letters = dead_letters if top is not None else "keep"

    def judged(self, event: RequestEvent, suite: str) -> tuple[RequestEvent, dict[str, int] | None]:
        """(the event as the judges see it, counts per kind; None: the suite does not redact)."""
        redactor = self.by_suite.get(suite)
        if redactor is None:
            return event, None
        redacted, counts = redactor.event(event)
        count_redactions(counts)
        return redacted, counts

    def texts(self, suite: str, texts: Sequence[str | None]) -> list[str | None]:
        """``texts`` redacted in one scope (the same value, the same placeholder); unchanged when the suite
        does not redact."""
        redactor = self.by_suite.get(suite)
        if redactor is None:
            return list(texts)
        scope = redactor.scope()
        present = [t for t in texts if t is not None]
        done = iter(scope.texts(present))
        count_redactions(scope.counts)
        return [None if t is None else next(done) for t in texts]

    def result(self, result: GradedResult) -> GradedResult:
        """``result`` with the texts a drill-down example keeps redacted (the result itself is not changed)."""
        redactor = self.by_suite.get(result.suite)
        if redactor is None:
            return result
        scope = redactor.scope()

        def red(text: str | None) -> str | None:
            return None if text is None else scope.text(text)

        evaluators = [
            e.model_copy(update={"reason": red(e.reason), "error": red(e.error)}) for e in result.evaluators
        ]
        update: dict[str, Any] = {"evaluators": evaluators, "reason": red(result.reason)}
        if result.judge is not None:
            judges = [
                v.model_copy(
                    update={"reasoning": red(v.reasoning), "reason": red(v.reason), "error": red(v.error)}
                )
                for v in result.judge.judges
            ]
            update["judge"] = result.judge.model_copy(
                update={"reason": red(result.judge.reason), "judges": judges}
            )
        count_redactions(scope.counts)
        return result.model_copy(update=update) if scope.counts else result

    def result_document(self, document: dict[str, Any]) -> dict[str, Any]:
        """A stored result as JSON (``GET /api/v1/results/{id}``) with the texts :meth:`result` redacts
        redacted the same way (one scope); the document itself is not changed."""
        suite = document.get("suite")
        redactor = self.by_suite.get(suite) if isinstance(suite, str) else None
        if redactor is None:
            return document
        scope = redactor.scope()

        def red(part: dict[str, Any], *names: str) -> dict[str, Any]:
            return part | {n: scope.text(part[n]) for n in names if isinstance(part.get(n), str)}

        out = dict(document)
        out["evaluators"] = [red(e, "reason", "error") for e in document.get("evaluators") or ()]
        out = red(out, "reason")
        judge = document.get("judge")
        if isinstance(judge, dict):
            judges = [red(v, "reasoning", "reason", "error") for v in judge.get("judges") or ()]
            out["judge"] = red(judge, "reason") | {"judges": judges}
        count_redactions(scope.counts)
        return out if scope.counts else document

    def dead_letter(self, raw: bytes, reason: str) -> tuple[bytes, str, DeadLetterTruncation | None]:
        """(raw bytes, reason, truncation) of a dead letter under the ``dead_letters`` policy: ``keep`` as
        they are; ``redact``: the values in them masked; ``digest``: no bytes, only their length and SHA-256
        (as a letter cut to nothing whose whole was not kept)."""
        if self.dead_letters == "keep" or self.top is None:
            return raw, reason, None
        scope = self.top.scope()
        reason = scope.text(reason)
        if self.dead_letters == "digest":
            count_redactions(scope.counts)
            cut = DeadLetterTruncation(
                length=len(raw),
                sha256=hashlib.sha256(raw).hexdigest(),
                tail="",
                stored_key=None,
                stored_until=None,
            )
            return b"", reason, cut
        out = redact_raw(raw, scope)
        count_redactions(scope.counts)
        return out, reason, None

    def letter(self, letter: DeadLetter) -> DeadLetter:
        """``letter`` (made elsewhere, not yet cut to fit the broker) under the ``dead_letters`` policy, as
        :meth:`dead_letter` treats the engine's own: the same letter under ``keep``."""
        if self.dead_letters == "keep" or self.top is None:
            return letter
        if letter.truncated is not None:  # its whole is in Redis already, unredacted: a wiring mistake
            raise ValueError("redact a dead letter before it is cut to fit the broker")
        raw, reason, truncated = self.dead_letter(base64.b64decode(letter.raw), letter.reason)
        return letter.model_copy(
            update={
                "raw": base64.b64encode(raw).decode("ascii"),
                "reason": clip(reason),
                "truncated": truncated,
            }
        )


def redact_raw(raw: bytes, scope: Scope) -> bytes:
    """A message's bytes with the values in them redacted: a JSON document string by string (its escapes
    read first, so ``\\n13800138000`` is seen as a new line and a number), anything else as text."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return scope.text(raw.decode("utf-8", errors="replace")).encode()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return scope.text(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {scope.text(k): walk(v) for k, v in value.items()}
        return value

    return orjson.dumps(walk(document))


def build_redactors(
    top: RedactConfig | None,
    suites: Iterable[tuple[str, tuple[str | int, ...], RedactOverride | bool | None]],
    *,
    environ: Mapping[str, str] | None = None,
    file: str = "<config>",
) -> Redactors | None:
    """The pipeline's redactors: ``suites`` are (name, path in the suite file, its ``redact`` value); None
    when no suite redacts and dead letters are kept (then nothing costs anything). A ``hash`` key that is
    not set or too short fails when the suite file is loaded (:func:`~._config.redact_issues`); should the
    variable be gone by now, it fails here, with the same path and message."""
    env = os.environ if environ is None else environ
    issues: list[ConfigIssue] = []

    def build(config: RedactConfig, at: tuple[str | int, ...]) -> Redactor | None:
        key = None
        if config.chosen_mode == "hash":
            key, problem = hash_key(config.hash_key_env or "", env)
            if problem is not None:
                path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at)[1:]
                issues.append(ConfigIssue(file, path, problem))
                return None
        return Redactor(config, key=key)

    by_suite: dict[str, Redactor] = {}
    for name, at, own in suites:
        config = effective(top, own)
        if config is None:
            continue
        built = build(config, key_path(at, own))
        if built is not None:
            by_suite[name] = built
    top_redactor = (
        build(top, ("redact", "hash_key_env")) if top is not None and top.dead_letters != "keep" else None
    )
    if issues:
        raise ConfigError(list(dict.fromkeys(issues)))  # suites sharing the top level's key: said once
    if not by_suite and top_redactor is None:
        return None
    return Redactors(by_suite, top_redactor, top.dead_letters if top is not None else "keep")


def redact_command(
    top: RedactConfig | None,
    own: Mapping[str, RedactOverride | bool | None],
    suite: str | None,
    text: str,
    *,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, dict[str, int]]:
    """``streameval redact``: ``text`` redacted as suite ``suite`` (None: the top-level block) redacts it."""
    if suite is not None and suite not in own:
        raise UsageError(f"no suite or session {suite!r}; the file has: {', '.join(own) or 'none'}")
    name = suite or ""
    redactors = build_redactors(top, [(name, (), own.get(name))], environ=environ)
    redactor = None if redactors is None else redactors.by_suite.get(name)
    if redactor is None:
        where = f"suite {suite!r}" if suite else "the top level"
        raise UsageError(f"{where} redacts nothing: the suite file has no redact: block for it")
    return redactor.text(text)
