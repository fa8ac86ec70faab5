"""Conversations and agent runs go to the review queue like events: a closed session's new result that meets
the review criteria is published on the review topic and kept for the page with its thread."""

from __future__ import annotations

from typing import Any

import orjson
import redis.asyncio as aioredis

from streameval.config import parse_config_text
from streameval.features.review_page import ReviewPageStore, item_key
from streameval.features.sessions.closer import SessionCloser
from streameval.features.sessions.state import SessionStore, session_terms
from streameval.features.sessions.thread import render, thread_turns
from streameval.features.sessions.turns import turns_in
from streameval.features.setup import annotators, batch_steps, session_review
from streameval.models import ReviewItem, SessionResult, format_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline
from streameval.store import ResultStore

CONFIG = """
suites:
  - {name: chat, default: true, evaluators: [{evaluator: exact_match}]}
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    evaluators: [{evaluator: turn_scores}]
review: {rate_per_min: 100, margin: 1.0, control_rate: 0.0}
"""


def turn(i: int, at: float, output: str, last: bool = False) -> bytes:
    return orjson.dumps(
        {
            "id": f"c1-{i}",
            "model": "m",
            "input": f"question {i}",
            "output": output,
            "expected": "Paris",
            "timestamp": format_time(at),
            "metadata": {"conversation_id": "c1", "last": last},
        }
    )


async def test_a_closed_sessions_result_is_a_review_item_with_its_thread(
    aredis: aioredis.Redis, prefix: str
) -> None:
    _, suites = parse_config_text(CONFIG)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    state = SessionStore(aredis, session_terms(suites.sessions, 0.0), prefix=prefix)
    review = session_review(batch_steps(aredis, store, suites, state))
    assert review is not None
    closer = SessionCloser(state, store, pipeline, suites.sessions, review=review)
    seconds, _ = await aredis.time()
    turns = []
    for i, output in enumerate(["Paris", "Lyon <b>x</b>"]):
        outcome = await pipeline.process(turn(i, seconds - 5 + i, output, last=i == 1))
        turns += turns_in(outcome.annotations)
    await state.append(turns)
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)

    assert await closer.run_once(send) == 1
    assert sorted(m.kind for m in sent) == ["review", "session"]
    result = SessionResult.model_validate_json(next(m.value for m in sent if m.kind == "session"))
    item = ReviewItem.model_validate_json(next(m.value for m in sent if m.kind == "review"))
    assert (item.id, item.model, item.suite) == (result.id, "m", "conv") and item.score == result.score
    assert item.reasons == ["near_threshold"] and item.input and "conversation of 2 turn(s)" in item.input
    assert item.output is not None and "### turn 2 - assistant\nLyon <b>x</b>" in item.output
    doc: dict[str, Any] | None = await ReviewPageStore(aredis, prefix, suites.review).document(
        item_key("m", "conv", result.id)
    )
    assert doc is not None and doc["item"]["id"] == result.id
    assert doc["thread"] == [
        {"role": "user", "text": "question 0"},
        {"role": "assistant", "text": "Paris"},
        {"role": "user", "text": "question 1"},
        {"role": "assistant", "text": "Lyon <b>x</b>"},
    ]
    assert "transcript" not in (doc["event"] or {}).get("metadata", {})  # the thread is the turns
    sent.clear()
    assert await closer.run_once(send) == 0 and sent == []  # closed: nothing again


AGENT_RUN: list[dict[str, Any]] = [
    {
        "input": "Book a room in Paris",
        "role": "assistant",
        "step": "plan",
        "calls": [{"name": "search", "arguments": '{"city": "Paris"}'}],
    },
    {"step": "tool", "tools": [{"name": "search", "arguments": '{"city": "Paris"}', "result": "3 hotels"}]},
    {"step": "agent", "tools": [{"name": "booker", "agent": True, "error": "no rooms left"}]},
    {"input": "Book a room in Paris", "role": "assistant", "output": "Sorry, none left.", "tools": []},
    {"step": "end", "name": "travel", "error": True, "output": "gave up"},
]


def test_an_agent_runs_thread_has_the_words_the_judges_read() -> None:
    """The thread the page shows an agent run in: each step's words as :func:`render` gives them to the
    judges (the run's task once, then its calls, the reply, the end)."""
    thread = thread_turns(AGENT_RUN)
    assert thread == [
        {"role": "user", "text": "Book a room in Paris"},
        {"role": "plan", "text": 'assistant asked for search({"city": "Paris"})'},
        {"role": "tool", "text": 'tool call search({"city": "Paris"}) -> 3 hotels'},
        {"role": "tool", "text": "sub-agent booker failed: no rooms left"},
        {"role": "assistant", "text": "Sorry, none left."},
        {"role": "end", "text": "the run ended (travel) failed: gave up"},
    ]
    rendered = render(AGENT_RUN, 0)
    assert all(turn["text"] in rendered for turn in thread)
