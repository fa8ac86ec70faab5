"""The suite file's ``redact:`` block: globally (top level) and per suite or session (docs/redact.md).

.. code-block:: yaml

    redact:                      # top level: every suite and session
      detectors: [email, phone, cn_id, card]     # default: all built-in detectors
      fields: [input, output, expected, references, context]   # default: all of them
      mode: mask                 # mask: [EMAIL_1] | hash: [EMAIL#a1b2c3d4] (keyed) | drop: [REDACTED]
      hash_key_env: STREAMEVAL_REDACT_KEY   # mode hash: the environment variable holding the key
      patterns:                  # your own kinds
        - {kind: ORDER_REF, pattern: 'REF-\\d{8}'}
      allow: [support@example.com]           # values never redacted (exact, case-insensitive)
      dead_letters: keep         # keep | redact | digest: what a dead letter's raw bytes hold
    suites:
      - name: qa
        redact: {mode: hash}     # per suite: these fields replace the top level's; false: off here

A suite's effective block is :func:`effective`: the top-level block with the suite's fields laid over it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._detectors import DetectorName

__all__ = [
    "FIELDS",
    "MIN_KEY_BYTES",
    "DeadLetterRaw",
    "Field_",
    "Mode",
    "PatternSpec",
    "RedactConfig",
    "RedactOverride",
    "effective",
    "hash_key",
    "key_path",
    "redact_issues",
]

Mode = Literal["mask", "hash", "drop"]
Field_ = Literal["input", "output", "expected", "references", "context"]
FIELDS: tuple[Field_, ...] = ("input", "output", "expected", "references", "context")
DeadLetterRaw = Literal["keep", "redact", "digest"]

_KIND = r"^[A-Z][A-Z0-9_]{0,31}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PatternSpec(_Strict):
    """A custom detector: a regular expression (the ``regex`` package) and the kind its placeholders carry."""

    kind: str = Field(pattern=_KIND, description="the placeholder's kind, e.g. ORDER_REF in [ORDER_REF_1]")
    pattern: str = Field(min_length=1, max_length=2000, description="a regular expression")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            regex.compile(value)
        except regex.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value


class _Fields(_Strict):
    detectors: list[DetectorName] | None = Field(
        default=None, description="built-in detectors to run; default: all (docs/redact.md)"
    )
    fields: list[Field_] | None = Field(
        default=None, description="event fields redacted: input, output, expected, references, context"
    )
    mode: Mode | None = Field(default=None, description="mask | hash | drop")
    hash_key_env: str | None = Field(
        default=None, min_length=1, description="mode hash: the environment variable holding the key"
    )
    patterns: list[PatternSpec] | None = Field(default=None, max_length=64, description="custom detectors")
    allow: list[str] | None = Field(
        default=None, max_length=10_000, description="values never redacted (exact, case-insensitive)"
    )
    timeout_ms: float | None = Field(
        default=None, gt=0, le=10_000, description="per text, for each pattern (default 50 ms)"
    )


class RedactOverride(_Fields):
    """A suite's or session's ``redact:`` block: what it changes of the top-level block."""


class RedactConfig(_Fields):
    """The top-level ``redact:`` block (module docstring), or a suite's effective one."""

    dead_letters: DeadLetterRaw = Field(
        default="keep",
        description="dead letters' raw bytes: keep (replayable), redact (text values masked), digest (SHA-256 only)",
    )

    @property
    def chosen_detectors(self) -> tuple[str, ...]:
        from ._detectors import DETECTORS

        chosen = set(DETECTORS) if self.detectors is None else set(self.detectors)
        return tuple(name for name in DETECTORS if name in chosen)  # priority order

    @property
    def chosen_fields(self) -> tuple[Field_, ...]:
        return FIELDS if self.fields is None else tuple(f for f in FIELDS if f in self.fields)

    @property
    def chosen_mode(self) -> Mode:
        return self.mode or "mask"

    @property
    def timeout_s(self) -> float:
        return (self.timeout_ms or 50.0) / 1000.0


def effective(top: RedactConfig | None, suite: RedactOverride | bool | None) -> RedactConfig | None:
    """A suite's redaction: off (None) when the suite says ``false`` or neither block exists."""
    if suite is False or (top is None and suite is None):
        return None
    base = top or RedactConfig()
    if suite is None or suite is True:
        return base
    return base.model_copy(update={k: getattr(suite, k) for k in suite.model_fields_set})


#: the ``hash`` mode's key: at least this many bytes (a short key is guessed, and with it every value)
MIN_KEY_BYTES = 16


def hash_key(name: str, environ: Mapping[str, str]) -> tuple[bytes | None, str | None]:
    """(the key in variable ``name``, or None and why it cannot be used)."""
    value = environ.get(name)
    if not value:
        return None, f"environment variable {name!r} (the hash key) is not set"
    key = value.encode()
    if len(key) < MIN_KEY_BYTES:
        return None, (
            f"environment variable {name!r} (the hash key) holds {len(key)} bytes; "
            f"at least {MIN_KEY_BYTES} (a short key can be guessed, and with it every value)"
        )
    return key, None


def redact_issues(
    top: RedactConfig | None,
    suites: Sequence[tuple[tuple[str | int, ...], Any]],
    *,
    environ: Mapping[str, str] | None = None,
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Problems the models alone cannot see, found when the suite file is loaded: ``hash`` without a key
    variable, or with one that is not set (or too short) in ``environ`` (default: the process's
    environment); ``suites`` are (path of the suite, its ``redact`` value)."""
    env = os.environ if environ is None else environ
    for base, own in [(("redact",), top), *(((*at, "redact"), own) for at, own in suites)]:
        if isinstance(own, bool) or own is None:
            continue
        merged = effective(top, own)
        if merged is not None and merged.chosen_mode == "hash" and not merged.hash_key_env:
            yield (*base, "hash_key_env"), "mode hash needs hash_key_env: the variable holding the key"
        if merged is not None and not merged.chosen_detectors and not merged.patterns:
            yield (*base, "detectors"), "no detector and no pattern: nothing would be redacted"
    # the key itself, as the worker will read it (build_redactors): a missing one fails now, not after the
    # worker has waited for its brokers
    seen: set[tuple[str | int, ...]] = set()
    used = [(key_path(at, own), effective(top, own)) for at, own in suites]
    if top is not None and top.dead_letters != "keep":
        used.append((("redact", "hash_key_env"), top))
    for at, config in used:
        if config is None or config.chosen_mode != "hash" or not config.hash_key_env or at in seen:
            continue
        seen.add(at)
        _, problem = hash_key(config.hash_key_env, env)
        if problem is not None:
            yield at, problem


def key_path(at: tuple[str | int, ...], own: RedactOverride | bool | None) -> tuple[str | int, ...]:
    """The path of the field naming a suite's key variable: its own block's, else the top level's."""
    if isinstance(own, RedactOverride) and "hash_key_env" in own.model_fields_set:
        return (*at, "redact", "hash_key_env")
    return ("redact", "hash_key_env")
