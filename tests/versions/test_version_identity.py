"""Suite versions: what changes a suite's version and what does not (docs/versions.md)."""

from __future__ import annotations

import textwrap
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from streameval import schemas
from streameval.config import parse_config_text
from streameval.models import GradedResult
from streameval.pipeline import Pipeline
from streameval.versioning import canonical_json, definition_hash, is_version

BASE = """
suites:
  - name: qa
    match: {category: [qa_simple]}
    threshold: 0.6
    evaluators:
      - {evaluator: exact_match, weight: 2}
      - {evaluator: similarity, params: {algorithm: levenshtein, threshold: 0.8}, weight: 1}
      - {evaluator: regex, name: has_digit, params: {pattern: '\\d'}, weight: 0, gate: true}
"""

# the same suite: other layout, comments, key order, spelled-out defaults and numbers
REFORMATTED = """
# a comment
suites:
- evaluators:
  - weight: 2.0
    evaluator: exact_match      # same step
  - evaluator: similarity
    weight: 1
    params:
      threshold: 0.80
      algorithm: levenshtein
  - gate: true
    params: {pattern: '\\d'}
    name: has_digit
    evaluator: regex
    weight: 0
  threshold: 0.60
  grading: levels
  name: qa
  match:
    category: [qa_simple]
"""


def version_of(text: str, suite: str = "qa") -> str:
    _, suites = parse_config_text(textwrap.dedent(text))
    return suites.by_name[suite].version


def test_a_reformatted_suite_keeps_its_version() -> None:
    assert is_version(version_of(BASE))
    assert version_of(REFORMATTED) == version_of(BASE)


def test_defaults_spelled_out_keep_the_version() -> None:
    # regex's params have defaults; the resolved (validated) params are hashed, not the file's text
    plain = BASE.replace("{pattern: '\\d'}", "{pattern: '\\d', flags: ''}")
    assert plain != BASE
    assert version_of(plain) == version_of(BASE)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("threshold: 0.6", "threshold: 0.7"),  # threshold
        ("{evaluator: exact_match, weight: 2}", "{evaluator: exact_match, weight: 3}"),  # weight
        ("threshold: 0.8}", "threshold: 0.9}"),  # an evaluator's params
        ("weight: 0, gate: true", "weight: 0, gate: false"),  # gates
        ("threshold: 0.6\n", "threshold: 0.6\n    grading: letters\n"),  # grade scale
        ("name: has_digit", "name: has_number"),  # result names
    ],
)
def test_what_changes_a_result_changes_the_version(old: str, new: str) -> None:
    changed = BASE.replace(old, new, 1)
    assert changed != BASE
    assert version_of(changed) != version_of(BASE)


def test_routing_and_labels_do_not_change_the_version() -> None:
    routed = BASE.replace(
        "match: {category: [qa_simple]}", "match: {category: [qa_simple, other]}\n    default: true"
    )
    labelled = BASE.replace("threshold: 0.6", "threshold: 0.6\n    label: v1")
    assert version_of(routed) == version_of(labelled) == version_of(BASE)


def test_code_source_is_part_of_the_version() -> None:
    code = """
    suites:
      - name: qa
        default: true
        evaluators:
          - evaluator: code
            params:
              language: python
              code: |
                def evaluate(output, expected, context):
                    return {"score": 1.0, "passed": True}
    """
    edited = code.replace('"score": 1.0', '"score": 0.5')
    assert version_of(code) != version_of(edited)


JUDGED = """
judges:
  - {name: j1, protocol: openai, base_url: "http://127.0.0.1:1/v1", model: glm-4, weight: 1.0, timeout_s: 30}
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
    judge: {judges: [j1]}
"""


def test_judge_model_changes_the_version_its_timeout_does_not() -> None:
    assert version_of(JUDGED.replace("glm-4", "glm-5")) != version_of(JUDGED)
    assert version_of(JUDGED.replace("timeout_s: 30", "timeout_s: 90")) == version_of(JUDGED)
    assert version_of(
        JUDGED.replace("weight: 1.0, timeout", "weight: 1.0, scale: 0-10, timeout")
    ) != version_of(JUDGED)


def test_registered_versions_enter_the_version() -> None:
    text = """
    suites:
      - name: qa
        default: true
        evaluators: [{evaluator: registered, params: {name: min_len}}]
    """
    _, suites = parse_config_text(textwrap.dedent(text))
    before = suites.by_name["qa"].version
    assert suites.resolve_registry({"min_len": "abc@1"}) == ["qa"]
    v1 = suites.by_name["qa"].version
    assert suites.resolve_registry({"min_len": "abc@1"}) == []  # unchanged: nothing recomputed
    assert suites.resolve_registry({"min_len": "abc@2"}) == ["qa"]
    assert len({before, v1, suites.by_name["qa"].version}) == 3


def test_the_hash_is_of_canonical_json() -> None:
    assert (
        canonical_json({"b": 1, "a": [1.0, {"d": None, "c": True}]})
        == b'{"a":[1.0,{"c":true,"d":null}],"b":1}'
    )
    assert definition_hash({"a": 1, "b": 2}) == definition_hash({"b": 2, "a": 1})
    assert definition_hash({"a": 1}) != definition_hash({"a": 2})


async def test_results_carry_the_version_and_match_the_contract() -> None:
    _, suites = parse_config_text(textwrap.dedent(BASE))
    raw = b'{"id": "e1", "model": "m", "output": "Paris 1", "expected": "Paris 1", "category": "qa_simple"}'
    outcome = await Pipeline(suites).process(raw)
    assert outcome.result is not None
    doc = orjson.loads(outcome.result.model_dump_json())
    assert doc["suite_version"] == suites.by_name["qa"].version
    assert "shadow" not in doc and "backfill" not in doc  # absent unless set
    Draft202012Validator(schemas.load("result")).validate(doc)
    # without a version the document is what it was before versions: no new key at all
    plain = outcome.result.model_copy(update={"suite_version": None}).model_dump_json()
    assert "suite_version" not in plain
    assert GradedResult.model_validate_json(plain) == outcome.result.model_copy(
        update={"suite_version": None}
    )
    marked = outcome.result.model_copy(update={"shadow": True}).model_dump_json()
    Draft202012Validator(schemas.load("result")).validate(orjson.loads(marked))
    assert orjson.loads(marked)["shadow"] is True


async def test_a_registry_update_moves_the_suite_version(aredis: Any, prefix: str) -> None:
    """The worker's listener (streameval.runtime) recomputes versions after every registry reload."""
    import asyncio

    from streameval.registry import CodeConfig, LiveRegistry, RegistryStore

    text = """
    suites:
      - name: qa
        default: true
        evaluators: [{evaluator: registered, params: {name: short}}]
    """
    _, suites = parse_config_text(textwrap.dedent(text))
    store = RegistryStore(aredis, prefix=prefix)
    record = await store.create(
        name="short",
        description=None,
        config=CodeConfig(language="python", code="def evaluate(o, e, c):\n    return 1.0\n"),
    )
    registry = LiveRegistry(store, resync_s=60)  # only pub/sub brings the change within the deadline
    registry.listeners.append(lambda live: suites.resolve_registry(live.versions()))
    await registry.start()
    try:
        v1 = suites.by_name["qa"].version
        assert suites.by_name["qa"].definition["evaluators"][0]["registered_version"] == f"{record.id}@1"
        await asyncio.sleep(0.5)  # the follower subscribed (a close during its SUBSCRIBE hangs in redis-py)
        registry.changed.clear()
        await store.update(
            record, config=CodeConfig(language="python", code="def evaluate(o, e, c):\n    return 0.5\n")
        )
        await asyncio.wait_for(registry.changed.wait(), 10)
        assert suites.by_name["qa"].version != v1
        assert suites.by_name["qa"].definition["evaluators"][0]["registered_version"] == f"{record.id}@2"
    finally:
        await registry.close()


SESSIONS = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
sessions:
  - name: chat
    key: metadata.conversation_id
    gap_s: 300
"""


def test_sessions_have_versions_of_their_definition() -> None:
    def session_version(text: str) -> str:
        _, loaded = parse_config_text(textwrap.dedent(text))
        [session] = loaded.sessions
        return session.suite.version

    base = session_version(SESSIONS)
    assert len(base) == 12
    assert session_version(SESSIONS.replace("gap_s: 300", "gap_s: 300.0")) == base
    assert session_version(SESSIONS.replace("gap_s: 300", "gap_s: 60")) != base  # what forms a session
    assert session_version(SESSIONS.replace("key: metadata.conversation_id", "key: metadata.thread")) != base
