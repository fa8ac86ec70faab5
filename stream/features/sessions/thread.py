"""What a closed session is judged on: its thread as one request event, and its rule metrics.

The thread event goes through the same :meth:`streameval.pipeline.Pipeline.evaluate` as any event, with
the session's scoring suite: its rule evaluators, its judge panel, combine, gates and grades. It holds:

* ``output``: the whole thread in order (:func:`render`): each turn's input (``user``; a turn whose input
  is the user message shown last, as an agent run's LLM calls each carry the run's task, says so in one
  line instead of repeating it) and reply (the turn's role, ``assistant`` by default) and its tool
  calls; an agent run's steps (tool and sub-agent spans: the call, its clipped arguments and result or
  its error; an LLM call that answered with tool calls only: its input as any turn's and ``assistant
  asked for get_weather({...}), ...``; the root span's end) in their place in time; the judges see it as
  the text under evaluation. The model's name is not in it (blind mode holds: the judges see it as
  "Model A").
* ``input``: one line saying what the thread is (turn count, turns left out).
* ``category``: the session's ``category`` (default ``multi_turn``: the multi-judge spec's rubric
  context_retention 40 %, relevance 30 %, coherence 30 %).
* ``metadata.session``: name, key, revision and the rule metrics (:func:`thread_metrics`);
  ``metadata.transcript``: the turns themselves (code evaluators read them).
* ``agent``: the agent spec's fields over the thread: rounds = turns, time = duration, quality = the
  mean turn score, one domain score per turn (``collaboration_efficiency``, ``adaptability``).

Truncation: a session keeps at most ``max_turns`` turns and ``max_bytes`` bytes; beyond, the turn in the
middle of the thread is dropped, repeatedly, so the first and last turns stay. The thread says where
and how many turns were left out, and the result says ``truncated``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ...blocks import AgentBlock, DomainScore
from ...models import RequestEvent, format_time

__all__ = ["render", "result_id", "thread_event", "thread_metrics", "thread_turns"]


def result_id(session: str, key: str, revision: int) -> str:
    """The id of revision ``revision`` of a session's result."""
    return f"{session}:{key}#{revision}"


def thread_metrics(turns: list[dict[str, Any]], received: int) -> dict[str, Any]:
    """Rule metrics over the kept ``turns`` (in order) of a session that received ``received`` turns.

    Scores, domains and the agent figures read the scored turns (an agent run's steps have no score);
    tool calls and their errors are the ``tools`` of turns and of tool and sub-agent steps (a ``plan``
    step's requested ``calls`` are not: the tool spans are); a run with no scored turn kept scores 0."""
    scored = [t for t in turns if t.get("score") is not None]
    scores = [float(t["score"]) for t in scored] or [0.0]
    first, last = turns[0]["t"], turns[-1]["t"]
    duration = max(0.0, last - first)
    calls = [call for t in turns for call in t.get("tools") or ()]
    tool_errors = sum(1 for call in calls if call.get("error"))
    unclean = sum(
        1
        for t in turns
        if t["refusal"] or t["error"] or t["gates"] or any(call.get("error") for call in t.get("tools") or ())
    )
    mean = math.fsum(scores) / len(scores)
    by_domain: dict[str, list[float]] = defaultdict(list)
    for t in scored:
        by_domain[t["domain"]].append(float(t["score"]))
    domains = {d: math.fsum(v) / len(v) for d, v in sorted(by_domain.items())}
    return {
        "turns": received,
        "kept": len(turns),
        "dropped": received - len(turns),
        "duration_s": round(duration, 3),
        "score_min": min(scores),
        "score_mean": mean,
        "score_last": scores[-1],
        "refusals": sum(1 for t in turns if t["refusal"]),
        "errors": sum(1 for t in turns if t["error"]),
        "gate_failures": sum(1 for t in turns if t["gates"]),
        "tool_calls": len(calls),
        "tool_errors": tool_errors,
        "steps": sum(1 for t in turns if t.get("step")),
        "unclean_turns": unclean,
        # the agent spec: quality / (rounds x time + 1), rounds = turns, time = duration; 0 when time is 0
        "collaboration_efficiency": 0.0 if duration == 0 else mean / (received * duration + 1),
        # the agent spec: the mean of the per-domain means
        "adaptability": math.fsum(domains.values()) / len(domains) if domains else 0.0,
        "domains": domains,
    }


def _call(call: dict[str, Any]) -> str:
    text = f"{'sub-agent' if call.get('agent') else 'tool call'} {call['name']}"
    if "arguments" in call:
        text += f"({call['arguments']})"
    if call.get("error"):
        text += f" failed: {call['error']}"
    elif "result" in call:
        text += f" -> {call['result']}"
    return text


def _request(call: dict[str, Any]) -> str:
    """A tool call an LLM call asked for (a ``plan`` step): its name and arguments."""
    arguments = call.get("arguments")
    return f"{call['name']}({arguments})" if arguments is not None else f"{call['name']}()"


def render(turns: list[dict[str, Any]], dropped: int) -> str:
    """The thread as the judges read it: turns in order, roles, tool calls; dropped turns counted where
    they were (the middle)."""
    lines: list[str] = []
    middle = len(turns) // 2 if dropped else -1
    shown: tuple[str, int] | None = None  # the last user message shown, and its turn
    for n, turn in enumerate(turns):
        if n == middle:
            lines.append(
                f"[... {dropped} turn(s) left out here: the thread is longer than the session keeps ...]"
            )
        number = n + 1 if not dropped or n < middle else n + 1 + dropped
        step = turn.get("step")
        if step in ("tool", "agent"):  # a tool or sub-agent span: the call, its arguments, result or error
            lines.extend(f"### turn {number} - {_call(call)}" for call in turn.get("tools") or ())
            continue
        if step == "end":  # the run's root span ended
            failed = f" failed: {turn['output']}" if turn.get("error") else ""
            lines.append(f"### turn {number} - the run ended ({turn.get('name', '?')}){failed}")
            continue
        text = turn.get("input")
        if text is not None:
            # an agent's LLM calls each carry the run's last user message: shown once, then referred to
            if shown is not None and shown[0] == text:
                lines.append(f"### turn {number} - user: the same message as turn {shown[1]}")
            else:
                lines.append(f"### turn {number} - user\n{text}")
                shown = (text, number)
        if step == "plan":  # an LLM call that answered with tool calls only: what it asked for
            asked = ", ".join(_request(call) for call in turn.get("calls") or ()) or "tools"
            lines.append(f"### turn {number} - {turn['role']} asked for {asked}")
            continue
        lines.append(f"### turn {number} - {turn['role']}\n{turn['output']}")
        lines.extend(f"- {_call(call)}" for call in turn.get("tools") or ())
    return "\n".join(lines)


def thread_turns(turns: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The thread as the review page shows it: ``{role, text}`` in order (a turn's input as ``user``, once
    while it repeats; its reply under its role; an agent run's steps as ``tool``, ``plan`` or ``end``), the
    same words as :func:`render` gives the judges."""
    out: list[dict[str, str]] = []
    shown: str | None = None  # the last user message shown: an agent's LLM calls each carry the run's task
    for turn in turns:
        step = turn.get("step")
        if step in ("tool", "agent"):
            out.extend({"role": "tool", "text": _call(call)} for call in turn.get("tools") or ())
            continue
        if step == "end":
            failed = f" failed: {turn['output']}" if turn.get("error") else ""
            out.append({"role": "end", "text": f"the run ended ({turn.get('name', '?')}){failed}"})
            continue
        if turn.get("input") is not None and turn["input"] != shown:
            shown = str(turn["input"])
            out.append({"role": "user", "text": shown})
        if step == "plan":
            asked = ", ".join(_request(call) for call in turn.get("calls") or ()) or "tools"
            out.append({"role": "plan", "text": f"{turn['role']} asked for {asked}"})
            continue
        out.append({"role": str(turn["role"]), "text": str(turn["output"])})
        out.extend({"role": "tool", "text": _call(call)} for call in turn.get("tools") or ())
    return out


def thread_event(
    session: str, key: str, category: str, revision: int, turns: list[dict[str, Any]], received: int
) -> tuple[RequestEvent, dict[str, Any]]:
    """The request event a session is judged as, and its rule metrics (module docstring)."""
    metrics = thread_metrics(turns, received)
    dropped = received - len(turns)
    left_out = f", {dropped} of them left out in the middle" if dropped else ""
    event = RequestEvent(
        id=result_id(session, key, revision),
        model=next((t["model"] for t in reversed(turns) if t.get("model")), "unknown"),
        category=category,
        input=(
            f"An agent run of {received} step(s){left_out}: LLM calls, tool calls and their results or errors, "
            "in time order. Judge the trajectory as a whole: planning, tool use, recovery from errors, the "
            "final answer."
            if metrics["steps"]
            else f"A conversation of {received} turn(s){left_out}. Judge the replies over the whole thread, "
            "in order: what was said earlier, tool calls and their results included."
        ),
        output=render(turns, dropped),
        timestamp=format_time(turns[-1]["t"]),
        metadata={
            "session": {"name": session, "key": key, "revision": revision, "metrics": metrics},
            "transcript": turns,
        },
        agent=AgentBlock(
            task_quality=min(1.0, max(0.0, metrics["score_mean"])),
            communication_rounds=received,
            task_time=metrics["duration_s"],
            results=[
                DomainScore(domain=t["domain"][:128], score=float(t["score"]))
                for t in turns
                if t.get("score") is not None
            ],
        ),
    )
    return event, metrics
