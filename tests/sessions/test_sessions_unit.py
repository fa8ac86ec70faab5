"""Pure parts of sessions: config checks, key paths, the thread the judges read and its rule metrics."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.sessions.local import LocalSessions
from streameval.features.sessions.paths import MISSING, compile_event_path
from streameval.features.sessions.thread import render, thread_event, thread_metrics
from streameval.features.sessions.turns import turns_in
from streameval.features.setup import annotators
from streameval.judges._prompts import build_rubric
from streameval.judges._rubrics import RUBRICS
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline

SUITES = [{"name": "chat", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]


def config(**session: Any) -> dict[str, Any]:
    return {"suites": SUITES, "sessions": [{"name": "conv", "key": "metadata.c", **session}]}


def issues(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return [(i.path, i.message) for i in caught.value.issues]


def test_defaults_and_the_default_evaluator() -> None:
    _, suites = parse_config(config())
    [session] = suites.sessions
    c = session.config
    assert (c.gap_s, c.grace, c.max_turns, c.max_bytes, c.category) == (
        300.0,
        300.0,
        500,
        1 << 20,
        "multi_turn",
    )
    assert [b.name for b in session.suite.evaluators] == ["turn_scores"]
    assert suites.by_name.keys() == {"chat"}  # a session is never a routing target


@pytest.mark.parametrize(
    ("session", "path", "words"),
    [
        ({"key": "metadata..c"}, "sessions[0].key", "cannot read"),
        ({"gap_s": 0}, "sessions[0].gap_s", "greater than 0"),
        ({"max_turns": 2}, "sessions[0].max_turns", "greater than or equal to 3"),
        ({"assemble": "spans"}, "sessions[0].assemble", "no otlp_proto or otlp_json input"),
        ({"assemble": "spans", "key": "metadata.session_id"}, "sessions[0].key", "key: metadata.trace_id"),
        (
            {"evaluators": [{"evaluator": "turn_scores", "params": {"stat": "median"}}]},
            "sessions[0].evaluators[0].params.stat",
            "'min'",
        ),
        ({"evaluators": [{"evaluator": "nope"}]}, "sessions[0].evaluators[0].evaluator", "unknown evaluator"),
        ({"judge": {}}, "sessions[0].judge", "no top-level 'judges'"),
        ({"surprise": 1}, "sessions[0].surprise", "Extra inputs"),
    ],
)
def test_bad_session_fields_fail_with_their_path(session: dict[str, Any], path: str, words: str) -> None:
    found = issues(config(**session))
    assert any(p == path and words in m for p, m in found), found


def test_session_names_are_unique_and_apart_from_suites() -> None:
    twice = {"suites": SUITES, "sessions": [{"name": "a", "key": "id"}, {"name": "a", "key": "id"}]}
    assert any("repeated: a" in m for _, m in issues(twice))
    clash = {"suites": SUITES, "sessions": [{"name": "chat", "key": "id"}]}
    assert any("differ from suite names" in m for _, m in issues(clash))


def test_event_paths_reach_fields_dicts_and_lists() -> None:
    event = RequestEvent(id="e", model="m", output="o", metadata={"c": {"ids": ["x", 7]}, "n": None})
    assert compile_event_path("metadata.c.ids[1]").find(event) == 7
    assert compile_event_path("$.metadata.c.ids[-2]").find(event) == "x"
    assert compile_event_path("model").find(event) == "m"
    for missing in ("metadata.n", "metadata.zz", "agent.results", "nofield", "metadata.c.ids[5]"):
        assert compile_event_path(missing).find(event) is MISSING


def record(i: int, t: float, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"t{i}",
        "t": t,
        "role": "assistant",
        "input": f"q{i}",
        "output": f"a{i}",
        "model": "secret-model",
        "category": "qa_simple",
        "domain": "d1",
        "suite": "chat",
        "score": 0.5,
        "passed": True,
        "gates": [],
        "refusal": False,
        "error": False,
        **extra,
    }


def test_rule_metrics_over_the_thread() -> None:
    turns = [
        record(0, 10.0, score=0.2, domain="a"),
        record(1, 12.0, score=1.0, domain="a", refusal=True),
        record(
            2,
            14.0,
            score=0.6,
            domain="b",
            gates=["g"],
            tools=[{"name": "f", "error": "boom"}, {"name": "g", "error": None}],
        ),
    ]
    m = thread_metrics(turns, received=5)
    assert (m["turns"], m["kept"], m["dropped"], m["duration_s"]) == (5, 3, 2, 4.0)
    assert (m["score_min"], m["score_mean"], m["score_last"]) == (0.2, pytest.approx(0.6), 0.6)
    assert (m["refusals"], m["errors"], m["gate_failures"], m["tool_errors"], m["unclean_turns"]) == (
        1,
        0,
        1,
        1,
        2,
    )
    assert m["collaboration_efficiency"] == pytest.approx(0.6 / (5 * 4.0 + 1))  # agent spec, rounds = turns
    assert m["adaptability"] == pytest.approx((0.6 + 0.6) / 2)  # mean of domain means: a 0.6, b 0.6
    assert thread_metrics([record(0, 3.0)], 1)["collaboration_efficiency"] == 0.0  # no time: 0 (agent spec)


def test_the_thread_shows_every_turn_in_order_and_counts_dropped_turns_where_they_were() -> None:
    turns = [
        record(0, 1.0),
        record(1, 2.0, tools=[{"name": "search", "arguments": '{"q":1}', "result": "r"}]),
        record(8, 9.0),
        record(9, 10.0, role="planner"),
    ]
    text = render(turns, dropped=6)
    order = [
        text.index(s)
        for s in (
            "### turn 1 - user\nq0",
            "### turn 2 - assistant\na1",
            '- tool call search({"q":1}) -> r',
            "6 turn(s) left out",
            "### turn 9 - user\nq8",
            "### turn 10 - planner\na9",
        )
    ]
    assert order == sorted(order)


def test_a_user_message_repeated_by_the_next_turns_is_shown_once() -> None:
    task = "Plan a trip to Lyon and book the train."
    turns = [
        record(0, 1.0, input=task, output="Let me look for trains."),
        record(1, 2.0, step="tool", tools=[{"name": "trains", "arguments": "{}", "result": "9:00"}]),
        record(2, 3.0, input=task, output="The 9:00 train is booked."),
        record(3, 4.0, input="And a hotel?"),
        record(4, 5.0, input=task),  # not the last one shown: shown again
    ]
    text = render(turns, dropped=0)
    assert text.count(task) == 2
    assert "### turn 3 - user: the same message as turn 1\n### turn 3 - assistant\nThe 9:00 train" in text
    assert "### turn 4 - user\nAnd a hotel?" in text and f"### turn 5 - user\n{task}" in text


def test_a_plan_step_shows_its_input_as_any_turn_and_the_calls_it_asked_for() -> None:
    task = "Plan a trip to Lyon and book the train."
    calls = [{"name": "trains", "arguments": '{"to": "Lyon"}'}, {"name": "ping"}]
    turns = [
        record(0, 1.0, step="plan", input=task, output="", calls=calls),
        record(1, 2.0, step="tool", tools=[{"name": "trains", "arguments": "{}", "result": "9:00"}]),
        record(2, 3.0, input=task, output="The 9:00 train is booked."),
    ]
    assert render(turns, dropped=0).splitlines() == [
        "### turn 1 - user",
        task,
        '### turn 1 - assistant asked for trains({"to": "Lyon"}), ping()',
        "### turn 2 - tool call trains({}) -> 9:00",
        "### turn 3 - user: the same message as turn 1",
        "### turn 3 - assistant",
        "The 9:00 train is booked.",
    ]


def test_judges_see_the_whole_thread_blind_with_the_multi_turn_rubric() -> None:
    turns = [record(i, float(i)) for i in range(3)]
    event, _ = thread_event("conv", "k", "multi_turn", 0, turns, received=3)
    prompt = build_rubric(event, event.category or "", "0-10", blind=True)
    assert (
        prompt.weights
        == RUBRICS["multi_turn"]
        == {"context_retention": 0.40, "relevance": 0.30, "coherence": 0.30}
    )
    assert all(f"a{i}" in prompt.user and f"q{i}" in prompt.user for i in range(3))
    assert "secret-model" not in prompt.user and "secret-model" not in prompt.system
    assert event.metadata["transcript"] == turns  # code evaluators read the turns


async def test_offline_sessions_append_once_and_keep_first_and_last_turns() -> None:
    _, suites = parse_config(config(max_turns=3, end="metadata.end"))
    pipeline = Pipeline(suites, annotators=annotators(suites))
    local = LocalSessions(suites.sessions)
    for i in (0, 3, 1, 4, 2, 1):  # out of order, turn 1 twice
        event = {
            "id": f"e{i}",
            "model": "m",
            "output": "x",
            "expected": "x",
            "timestamp": f"2026-11-21T10:00:0{i}Z",
            "metadata": {"c": "k", "end": i == 4},
        }
        outcome = await pipeline.process(orjson.dumps(event))
        local.add(turns_in(outcome.annotations))
    [(graded, result)] = await local.close_all(pipeline)
    assert result.turn_ids[0] == "e0" and result.turn_ids[-1] == "e4" and len(result.turn_ids) == 3
    assert (result.metrics.turns, result.metrics.dropped, result.truncated, result.closed_by) == (
        5,
        2,
        True,
        "end",
    )
    assert (graded.suite, graded.id) == ("conv", "conv:k#0")


def test_a_turns_event_time_is_the_results_read_exactly_over_many_minutes() -> None:
    import random
    from types import SimpleNamespace

    from streameval.features.sessions.turns import _result_time
    from streameval.models import format_time, parse_time

    rng = random.Random(7)
    stamps = [rng.uniform(0, 4e9) for _ in range(3000)] + [0.0, 59.999, 60.0, 951782400.5, 1e9 + 0.001]
    for stamp in stamps:  # far more minutes than the cache holds: it is cleared and refilled
        text = format_time(stamp)
        assert _result_time(SimpleNamespace(event_time=text)) == max(0.0, round(parse_time(text), 3)), text
    odd = "2026-11-25T10:00:61.000Z"  # not a time: read the slow way, which refuses it as before
    with pytest.raises(ValueError, match="second"):
        _result_time(SimpleNamespace(event_time=odd))
