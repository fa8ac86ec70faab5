"""Decisions against hand-made cases, one rule at a time (docs/guard.md, "Decisions"); the section's checks
at load; a guard section changes no suite version."""

from __future__ import annotations

from typing import Any

import pytest
from _guard_helpers import CARD_FREE, guard_of, raw

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.guard._check import BadCheck, CheckTooLarge, Guard, NoGuardedSuite

EVALUATORS = [
    {"evaluator": "contains", "params": {"value": "ORD-"}, "weight": 2},
    {"evaluator": "regex", "name": "polite", "params": {"pattern": "(?i)thank"}},
    {"evaluator": "regex", "name": "no_card", "gate": True, "weight": 0, "params": {"pattern": CARD_FREE}},
]
GOOD = "Order ORD-1 ships today. Thank you!"
IMPOLITE = "Order ORD-1 ships today."  # score 2/3
CARD = "Order ORD-1, card 4111 1111 1111 1111. Thank you!"  # gate fails, score 1
NOTHING = "Soon."  # score 0


def _suite(**guard: Any) -> dict[str, Any]:
    return {"name": "support", "default": True, "threshold": 0.6, "evaluators": EVALUATORS, "guard": guard}


@pytest.mark.parametrize(
    ("guard", "output", "decision"),
    [
        # default: a result that does not pass (threshold or a gate) blocks, anything else is allowed
        ({}, GOOD, "allow"),
        ({}, IMPOLITE, "allow"),
        ({}, CARD, "block"),
        ({}, NOTHING, "block"),
        # block_below replaces the threshold
        ({"block_below": 0.7}, IMPOLITE, "block"),
        ({"block_below": 0.0}, NOTHING, "allow"),
        # warn_below: a band between block and allow
        ({"warn_below": 0.9}, IMPOLITE, "warn"),
        ({"warn_below": 0.9}, GOOD, "allow"),
        ({"block_below": 0.5, "warn_below": 0.9}, IMPOLITE, "warn"),
        # block_on: these evaluators block whatever the score; it replaces the gates
        ({"block_on": ["polite"]}, IMPOLITE, "block"),
        ({"block_on": ["polite"], "block_below": 0.0}, CARD, "allow"),
        ({"block_on": []}, CARD, "allow"),
        # warn_on: these evaluators warn
        ({"warn_on": ["polite"]}, IMPOLITE, "warn"),
        ({"warn_on": ["polite"]}, CARD, "block"),
    ],
)
async def test_decision_of_each_rule(guard: dict[str, Any], output: str, decision: str) -> None:
    checker = guard_of([_suite(**guard)])
    answer = await checker.check(raw(output))
    assert answer["decision"] == decision, answer["reasons"]
    assert answer["timedOut"] is False and answer["failMode"] is None
    assert [e["name"] for e in answer["evaluators"]] == ["contains", "polite", "no_card"]
    assert (decision == "allow") == (answer["reasons"] == [])


async def test_a_blocking_evaluator_is_named_with_its_reason() -> None:
    answer = await guard_of([_suite()]).check(raw(CARD))
    assert answer["reasons"] == [f"no_card failed: output does not match '{CARD_FREE}'"]
    assert answer["score"] == 1.0 and answer["passed"] is False


async def test_mask_answers_the_redacted_output_unless_it_blocks() -> None:
    checker = guard_of([_suite(mask=True)], redact={"detectors": ["email"]})
    answer = await checker.check(raw("Order ORD-1: write to bob@example.com. Thank you"))
    assert answer["decision"] == "mask"
    assert answer["output"] == "Order ORD-1: write to [EMAIL_1]. Thank you"
    plain = await checker.check(raw(GOOD))
    assert plain["decision"] == "allow" and "output" not in plain
    blocked = await checker.check(raw("Soon, bob@example.com"))
    assert blocked["decision"] == "block" and "output" not in blocked


async def test_without_mask_the_redaction_changes_no_decision() -> None:
    checker = guard_of([_suite()], redact={"detectors": ["email"]})
    answer = await checker.check(raw("Order ORD-1: write to bob@example.com. Thank you"))
    assert answer["decision"] == "allow" and "output" not in answer


async def test_an_event_without_id_gets_one_and_a_given_id_is_kept() -> None:
    checker = guard_of([_suite()])
    made = await checker.check(raw(GOOD))
    assert len(made["id"]) == 32
    assert (await checker.check(raw(GOOD, id="mine-1")))["id"] == "mine-1"


async def test_routing_is_the_streams_and_only_guarded_suites_answer() -> None:
    other = {"name": "other", "match": {"category": ["chat"]}, "evaluators": [{"evaluator": "exact_match"}]}
    checker = guard_of([other, _suite()])
    assert (await checker.check(raw(GOOD)))["suite"] == "support"
    with pytest.raises(NoGuardedSuite, match="suite 'other' has no guard: section; guarded suites: support"):
        await checker.check(raw(GOOD, category="chat"))
    with pytest.raises(NoGuardedSuite, match="unknown suite 'nope'; valid suites: support"):
        await checker.check(raw(GOOD), suite="nope")
    with pytest.raises(NoGuardedSuite, match="has no guard"):
        await checker.check(raw(GOOD, suite="other"))


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (b'{"model": "m", "output": "a", "output": "b"}', "$", "duplicate key 'output'"),
        (b'{"model": "m", "output": "a", "metadata": {"x": NaN}}', "$", "NaN is not JSON"),
        (b'{"model": "m", "output": "a", "metadata": {"x": 1e999}}', "$", "overflows a double"),
        (b'{"model": "m", "output": "a", "metadata": ' + b"[" * 70 + b"]" * 70 + b"}", "$", "nested 71"),
        (b'{"model": 7, "output": "a"}', "$.model", "valid string"),
        (b'{"model": "m"}', "$.output", "Field required"),
        (b'{"model": "m", "output": "a", "colour": "red"}', "$.colour", "Extra inputs"),
        (b"[1, 2]", "$", "Input should be an object"),
    ],
)
async def test_bad_events_are_a_400_naming_the_field(body: bytes, path: str, message: str) -> None:
    with pytest.raises(BadCheck) as caught:
        await guard_of([_suite()]).check(body)
    assert any(e["path"] == path and message in e["message"] for e in caught.value.errors), (
        caught.value.errors
    )


async def test_size_limits() -> None:
    _, loaded = parse_config({"suites": [_suite()]})
    checker = Guard(loaded, max_body_bytes=2048, max_text_chars=100)
    with pytest.raises(BadCheck) as caught:
        await checker.check(raw("x" * 101))
    assert caught.value.errors == [{"path": "$.output", "message": "longer than 100 characters"}]
    with pytest.raises(BadCheck, match=r"\$\.input"):
        await checker.check(raw("ok", input="y" * 101))
    with pytest.raises(CheckTooLarge, match="the limit is 2048"):
        await checker.check(raw("ok", metadata={"pad": "z" * 3000}))
    assert (await checker.check(raw("x" * 100)))["decision"] == "block"  # at the limit: checked


@pytest.mark.parametrize(
    ("guard", "path", "message"),
    [
        ({"block_on": ["nope"]}, "suites[0].guard.block_on[0]", "no evaluator 'nope' in this suite"),
        ({"warn_on": ["x"]}, "suites[0].guard.warn_on[0]", "no evaluator 'x'"),
        ({"judges": True}, "suites[0].guard.judges", "no judge panel"),
        ({"mask": True}, "suites[0].guard.mask", "mask needs redaction"),
        ({"on_timeout": "maybe"}, "suites[0].guard.on_timeout", "'allow' or 'block'"),
        ({"block_below": 0.8, "warn_below": 0.5}, "suites[0].guard", "the warn band would be empty"),
        ({"deadline_ms": 0}, "suites[0].guard.deadline_ms", "greater than 0"),
        ({"colour": 1}, "suites[0].guard.colour", "Extra inputs"),
    ],
)
def test_a_bad_guard_section_fails_at_load_naming_the_field(
    guard: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"suites": [_suite(**guard)]})
    assert any(i.path == path and message in i.message for i in caught.value.issues), caught.value.issues


def test_semantic_only_suites_need_semantic_true() -> None:
    suite = {
        "name": "s",
        "default": True,
        "evaluators": [{"evaluator": "semantic_similarity"}],
        "guard": {},
    }
    with pytest.raises(ConfigError, match="no weighted evaluator left"):
        parse_config({"suites": [suite]})


def test_a_guard_section_changes_no_suite_version() -> None:
    plain = {"name": "support", "default": True, "threshold": 0.6, "evaluators": EVALUATORS}
    _, without = parse_config({"suites": [plain]})
    _, with_guard = parse_config({"suites": [_suite(block_below=0.2, publish=True)]})
    assert without.all[0].version == with_guard.all[0].version


def test_a_file_without_a_guard_section_has_nothing_to_check() -> None:
    _, loaded = parse_config({"suites": [{"name": "s", "default": True, "evaluators": EVALUATORS}]})
    with pytest.raises(ValueError, match="no guard: section"):
        Guard(loaded)


async def test_model_based_evaluators_run_only_with_semantic_true() -> None:
    evaluators = [
        {"evaluator": "contains", "params": {"value": "Paris"}},
        {"evaluator": "semantic_similarity", "params": {"threshold": 0.5}},
    ]
    suite = {"name": "s", "default": True, "evaluators": evaluators}
    rules_only = guard_of([{**suite, "guard": {}}])
    answer = await rules_only.check(raw("The capital is Paris.", expected="Paris is the capital."))
    assert [e["name"] for e in answer["evaluators"]] == ["contains"] and answer["skipped"] == [
        "semantic_similarity"
    ]
    with_model = guard_of([{**suite, "guard": {"semantic": True, "deadline_ms": 30_000}}])
    await with_model.start()
    answer = await with_model.check(raw("The capital is Paris.", expected="Paris is the capital."))
    await with_model.close()
    assert [e["name"] for e in answer["evaluators"]] == ["contains", "semantic_similarity"]
    assert "skipped" not in answer and answer["evaluators"][1]["score"] > 0.5


def test_streameval_guard_refuses_a_file_without_a_guard_section_or_a_bad_one(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from streameval.cli import main

    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"suites": [{"name": "s", "default": True, "evaluators": EVALUATORS}]}))
    assert main(["guard", "--config", str(plain), "--port", "0"]) == 2
    assert "no suite has a guard: section" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"suites": [_suite(block_on=["nope"])]}))
    assert main(["guard", "--config", str(bad), "--port", "0"]) == 2
    assert "suites[0].guard.block_on[0]: no evaluator 'nope'" in capsys.readouterr().err
