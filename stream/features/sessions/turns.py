"""A session's turn: what a graded request event contributes to its conversation (or agent run).

The pipeline makes the turns of an event once its own result is graded (:func:`turns_of`, through the
:class:`TurnsAnnotator` the composition root gives it when the suite file has sessions: the outcome's
annotation :data:`KEY`); the worker appends them to the session's state after that result is recorded
(streameval.features.sessions.state, through its processor step). A turn
keeps what the thread's judges and rule metrics need, and nothing else:

``id`` (the event id: a redelivered turn is appended once), ``t`` (event time), ``role``, ``input``,
``output`` (each clipped to :func:`text_limit` characters), ``model``, ``category``, ``domain``, ``suite``,
the turn's own ``score`` / ``passed`` / ``gates`` (failed gates), ``refusal`` and ``error`` flags and
``tools`` (tool calls, when the event carries ``metadata.tool_calls``).

An agent run (a session with ``assemble: spans``) also has steps that are not request events: the
trace's tool spans, its sub-agents' spans (``invoke_agent`` below the root), its LLM calls that answered
with tool calls only and its root span (:func:`step_turns`). A step's turn has ``step`` (``tool``,
``agent``, ``plan`` or ``end``), no score (``score`` None: the rule metrics and the agent figures read
the scored turns only), and for a tool or sub-agent span one call in ``tools`` (a sub-agent's has
``agent: true``, its input as the arguments and its answer as the result); a ``plan`` step (an LLM call
that asked for tools and said nothing) has the ``model``, the ``input`` (the last user message) and the
calls it asked for in ``calls`` (name and arguments; not in ``tools``: the tool spans are the calls, a
request is neither a call nor an error); the root span's step carries the run's end marker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from ..._util import clip
from ...judges._refusal import find_refusal
from ...models import GradedResult, RequestEvent, parse_time

__all__ = [
    "KEY",
    "MAX_KEY_CHARS",
    "MAX_TOOL_CALLS",
    "TOOL_TEXT",
    "Turn",
    "TurnsAnnotator",
    "session_key",
    "step_turns",
    "text_limit",
    "turns_in",
    "turns_of",
]

#: the turns' slot in an outcome's annotations (streameval.envelope.Outcome)
KEY = "turns"

#: longer session keys are replaced by ``sha256:`` and their digest (ids and Redis keys stay bounded)
MAX_KEY_CHARS = 96
#: tool calls kept per turn; each one's arguments and result are clipped to TOOL_TEXT characters
MAX_TOOL_CALLS = 20
TOOL_TEXT = 500


class Turn(NamedTuple):
    """One event's place in one session of the suite file. ``key`` None: the event matched the session but
    carries no key there (counted as keyless, not appended). A named tuple: made per turn at the cost of a
    tuple, and of atomic values only, so the garbage collector stops tracking it."""

    session: str
    key: str | None
    id: str
    time: float
    end: bool = False
    payload: bytes = b""  # the turn record, JSON (module docstring)


class TurnsAnnotator:
    """Each event's turns (streameval.feature.Annotator): :func:`turns_of` for a graded event, :func:`step_turns`
    for an agent run's step. ``sessions``: the suite file's (:class:`streameval.config.Session`)."""

    key = KEY

    def __init__(self, sessions: Sequence[Any]) -> None:
        self.sessions = tuple(sessions)

    def annotate(self, evaluated: Sequence[tuple[RequestEvent, GradedResult, Any]]) -> list[tuple[Turn, ...]]:
        return [turns_of(self.sessions, event, result) for event, result, _ in evaluated]

    def step(self, document: dict[str, Any], now: float) -> tuple[Turn, ...]:
        return step_turns(self.sessions, document, now)


def turns_in(annotations: Mapping[str, Any]) -> tuple[Turn, ...]:
    """The turns among an outcome's ``annotations`` (none when the suite file has no sessions)."""
    turns: tuple[Turn, ...] = annotations.get(KEY, ())
    return turns


def text_limit(max_bytes: int) -> int:
    """Characters kept of a turn's input and of its output: an eighth of the session's byte bound."""
    return max(256, max_bytes // 8)


def session_key(value: Any) -> str | None:
    """The session key of a value found at the key path: strings and integers (not booleans), else None."""
    if type(value) is str:  # the common case
        if not value:
            return None
        return (
            value if len(value) <= MAX_KEY_CHARS else "sha256:" + hashlib.sha256(value.encode()).hexdigest()
        )
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    if not text:
        return None
    if len(text) > MAX_KEY_CHARS:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text


def _tools(metadata: dict[str, Any]) -> list[dict[str, Any]] | None:
    calls = metadata.get("tool_calls")
    if not isinstance(calls, list):
        return None
    out = []
    for call in calls[:MAX_TOOL_CALLS]:
        if not isinstance(call, dict):
            continue
        entry: dict[str, Any] = {"name": clip(str(call.get("name", "?")), 128)}
        for field in ("arguments", "result"):
            if field in call:
                value = call[field]
                text = (
                    value
                    if isinstance(value, str)
                    else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
                )
                entry[field] = clip(text, TOOL_TEXT)
        error = call.get("error")
        entry["error"] = clip(str(error), TOOL_TEXT) if error not in (None, False, "") else None
        out.append(entry)
    return out


def _record(event: RequestEvent, result: GradedResult, t: float, limit: int) -> dict[str, Any]:
    metadata = event.metadata
    get = metadata.get
    role = get("role")
    domain = get("domain")
    refusal = get("refusal")
    text, output = event.input, event.output
    error = bool(get("error"))
    if not error:
        for outcome in result.evaluators:
            if outcome.error is not None:
                error = True
                break
    record: dict[str, Any] = {
        "id": event.id,
        "t": t,  # the result's event time (the event's own, or when it was received)
        "role": clip(role, 64) if isinstance(role, str) and role else "assistant",
        "input": text if text is None or len(text) <= limit else clip(text, limit),
        "output": output if len(output) <= limit else clip(output, limit),
        "model": event.model,
        "category": event.category,
        "domain": clip(domain, 128) if isinstance(domain, str) and domain else (event.category or "default"),
        "suite": result.suite,
        "score": result.score,
        "passed": result.passed,
        "gates": list(result.failed_gates),
        "refusal": refusal if isinstance(refusal, bool) else find_refusal(output) is not None,
        "error": error,
    }
    if "tool_calls" in metadata:
        tools = _tools(metadata)
        if tools is not None:
            record["tools"] = tools
    return record


# epoch seconds of ``YYYY-MM-DDTHH:MM:SS`` (the whole seconds of the last event times read)
_SECONDS: dict[str, int] = {}


def _result_time(result: GradedResult) -> float:
    """Epoch seconds (ms), at least 0: the state orders turns by it as a fixed-width string. A result's
    event time is format_time's (``YYYY-MM-DDTHH:MM:SS.mmmZ``): its whole seconds are read once per
    second (cached), its milliseconds as digits; the same float as ``round(parse_time(...), 3)``."""
    text = result.event_time
    if len(text) == 24 and text[19] == "." and text[23] == "Z" and text[20:23].isdecimal() and text.isascii():
        whole = _SECONDS.get(text[:19])
        if whole is None:
            if len(_SECONDS) >= 256:
                _SECONDS.clear()
            whole = _SECONDS[text[:19]] = round(parse_time(text[:19]))
        t = (whole * 1000 + int(text[20:23])) / 1000
        return t if t > 0.0 else 0.0
    return max(0.0, round(parse_time(text), 3))


def turns_of(sessions: Sequence[Any], event: RequestEvent, result: GradedResult) -> tuple[Turn, ...]:
    """The turns ``event`` (graded as ``result``) adds to the sessions whose ``match`` accepts it
    (``sessions``: :class:`streameval.config.Session`, not imported: this module sits below the config)."""
    out = []
    t = None
    for session in sessions:
        config = session.config
        if config.match is not None and not config.match.accepts(event):
            continue
        if t is None:
            t = _result_time(result)
        key = session_key(session.key.find(event))
        if key is None:
            out.append(Turn(config.name, None, event.id, t))
            continue
        end = session.end is not None and session.end.find(event) is True
        record = _record(event, result, t, text_limit(config.max_bytes))
        out.append(Turn(config.name, key, event.id, t, end, orjson.dumps(record)))
    return tuple(out)


def _plan(step: dict[str, Any], t: float, limit: int) -> dict[str, Any]:
    """The turn of a ``plan`` step: an LLM call that answered with tool calls only (module docstring)."""
    given = step.get("input")
    model = step.get("model")
    calls = []
    for call in (step.get("calls") or ())[:MAX_TOOL_CALLS]:
        entry = {"name": clip(str(call.get("name") or "?"), 128)}
        if call.get("arguments") is not None:
            entry["arguments"] = clip(str(call["arguments"]), TOOL_TEXT)
        calls.append(entry)
    return {
        "id": step["id"],
        "t": t,
        "step": "plan",
        "role": "assistant",
        "name": clip(str(step.get("name") or "?"), 128),
        "input": clip(str(given), limit) if given is not None else None,
        "output": "",
        "model": clip(model, 256) if isinstance(model, str) and model else None,
        "category": None,
        "domain": None,
        "suite": None,
        "score": None,
        "passed": None,
        "gates": [],
        "refusal": False,
        "error": False,
        "calls": calls,
    }


def step_turns(sessions: Sequence[Any], step: dict[str, Any], received_at: float) -> tuple[Turn, ...]:
    """The turns a step of an agent run (a tool, sub-agent, plan or root span:
    :func:`streameval.inputs._genai.to_step`, :func:`~streameval.inputs._genai.to_plan`) adds to the
    ``assemble: spans`` sessions; the root span's step ends the run (the end marker). A span without an
    end time is placed when it was received (as an event without a timestamp)."""
    out = []
    t = max(0.0, round(float(step["t"]) or received_at, 3))
    for session in sessions:
        if session.config.assemble != "spans":
            continue
        key = session_key(session.key.find(step))
        if key is None:
            out.append(Turn(session.name, None, step["id"], t))
            continue
        kind = step["kind"]
        if kind == "plan":
            plan = _plan(step, t, text_limit(session.config.max_bytes))
            out.append(Turn(session.name, key, step["id"], t, False, orjson.dumps(plan)))
            continue
        error = step.get("error")
        called = kind in ("tool", "agent")  # a tool call, or a sub-agent (called by the run as a tool is)
        record: dict[str, Any] = {
            "id": step["id"],
            "t": t,
            "step": kind if called else "end",
            "role": "tool" if kind == "tool" else "agent",
            "name": clip(str(step.get("name") or "?"), 128),
            "input": None,
            "output": "",
            "model": None,
            "category": None,
            "domain": None,
            "suite": None,
            "score": None,
            "passed": None,
            "gates": [],
            "refusal": False,
            # a failed call counts as a tool error (below), a failed run as an error of the run
            "error": not called and bool(error),
        }
        if called:
            call: dict[str, Any] = {"name": record["name"]}
            if kind == "agent":
                call["agent"] = True
            for field in ("arguments", "result"):
                if step.get(field) is not None:
                    call[field] = clip(str(step[field]), TOOL_TEXT)
            call["error"] = clip(str(error), TOOL_TEXT) if error else None
            record["tools"] = [call]
        elif error:
            record["output"] = clip(str(error), TOOL_TEXT)
        out.append(Turn(session.name, key, step["id"], t, bool(step.get("root")), orjson.dumps(record)))
    return tuple(out)
